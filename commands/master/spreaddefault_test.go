package master_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/internal/testkit"
	"github.com/corralhq/corral/projections"
)

// Two replicas of a service go to two machines by default, on the master's
// own loop over PostgreSQL with real agents, even where packing would put
// both beside the cell's other work; a master restarted on the same log
// finds them so, and spreads the next job the same way.
func TestReplicasSpreadAcrossMasterRestart(t *testing.T) {
	c := newLinkCellOn(t, backends[0].Open(t), testLinkConfig())
	for _, m := range []string{"m0", "m1", "m2"} {
		c.startAgent(m, false)
	}
	testkit.Eventually(t, 15*time.Second, "three machines up", func() (bool, string) {
		return c.machineState("m0") == projections.MachineUp && c.machineState("m1") == projections.MachineUp &&
			c.machineState("m2") == projections.MachineUp, ""
	})
	// Most of one machine taken: best fit alone puts both replicas there.
	filler := c.spec("filler", 1, "exec sleep 600")
	filler.Resources = &events.Resources{CpuMilli: 1400, MemoryBytes: 1400 << 20, DiskBytes: 7 << 30, Ports: 64}
	c.submit(filler)
	c.runningOn("filler", 1, 20*time.Second, func(string) bool { return true })
	service := func(name string) *events.JobSpec {
		s := c.spec(name, 2, "exec sleep 600")
		s.Resources = &events.Resources{CpuMilli: 150, MemoryBytes: 64 << 20, DiskBytes: 256 << 20}
		return s
	}
	apart := func(job string) {
		t.Helper()
		ts := c.runningOn(job, 2, 20*time.Second, func(string) bool { return true })
		if ts[0].Machine == ts[1].Machine {
			t.Fatalf("both replicas of %s on %s; the cell has three machines with room", job, ts[0].Machine)
		}
	}
	c.submit(service("web"))
	apart("web")
	before := c.tasks("web")

	c.stopMaster()
	lm := c.startMaster("master2")
	testkit.Eventually(t, 10*time.Second, "every machine polled by the new master", func() (bool, string) {
		return lm.stats.Polls.Load() >= 6, fmt.Sprint(lm.stats.Polls.Load(), " polls")
	})
	apart("web")
	for i, tv := range c.tasks("web") {
		if b := before[i]; tv.Machine != b.Machine || tv.Pid != b.Pid {
			t.Errorf("web/%d: was pid %d on %s before the restart, pid %d on %s after", i, b.Pid, b.Machine, tv.Pid, tv.Machine)
		}
	}
	c.submit(service("api"))
	apart("api")
}
