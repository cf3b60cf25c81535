package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/commands/auth"
	"github.com/corralhq/corral/events"
)

// What a machine of `corral up` offers is refused, naming the flag, when it
// is no positive quantity, before anything is made on disk.
func TestUpRefusesBadMachineOffers(t *testing.T) {
	for _, c := range []struct{ flag, value string }{
		{"--machine-cpu", "0"}, {"--machine-cpu", "-2"}, {"--machine-cpu", "lots"}, {"--machine-cpu", "0.0001"},
		{"--machine-memory", "0"}, {"--machine-memory", "-1GiB"}, {"--machine-memory", "4m"}, {"--machine-memory", "2XB"},
	} {
		data := filepath.Join(t.TempDir(), "cell")
		code, _, stderr := run(t, "up", "--data", data, c.flag, c.value)
		if code != ExitUsage || !strings.Contains(stderr, c.flag) || strings.Contains(stderr, "unknown flag") {
			t.Errorf("up %s %s: exit %d, %q; want a usage error naming %s", c.flag, c.value, code, stderr, c.flag)
		}
		if _, err := os.Stat(data); !os.IsNotExist(err) {
			t.Errorf("up %s %s made %s (%v)", c.flag, c.value, data, err)
		}
	}
	o, err := machineOffer("40", "64GiB")
	if err != nil {
		t.Fatal(err)
	}
	got := o.fill(&events.Resources{CpuMilli: 666, MemoryBytes: 1 << 30, DiskBytes: 7})
	if got.CpuMilli != 40000 || got.MemoryBytes != 64<<30 || got.DiskBytes != 7 {
		t.Errorf("--machine-cpu 40 --machine-memory 64GiB offer %v; want 40 cores, 64 GiB and the share's disk", got)
	}
}

// A query's byte limit may not pass what a reply of the API may carry
// (auth.MaxReplyMsgSize), which the corral command receives: a bigger one
// is refused naming the flag and the bound, before anything is made.
func TestUpRefusesAQueryLimitPastTheReplyLimit(t *testing.T) {
	for _, v := range []string{"65MiB", "1GiB", "512", "lots"} {
		data := filepath.Join(t.TempDir(), "cell")
		code, _, stderr := run(t, "up", "--data", data, "--query-max-bytes", v)
		if code != ExitUsage || !strings.Contains(stderr, "--query-max-bytes") {
			t.Errorf("up --query-max-bytes %s: exit %d, %q; want a usage error naming the flag", v, code, stderr)
		}
		if strings.HasSuffix(v, "B") && !strings.Contains(stderr, "64MiB") {
			t.Errorf("up --query-max-bytes %s: %q does not name the bound", v, stderr)
		}
		if _, err := os.Stat(data); !os.IsNotExist(err) {
			t.Errorf("up --query-max-bytes %s made %s (%v)", v, data, err)
		}
	}
	l, err := (&infraFlags{memory: "2GiB", maxBytes: "64MiB", limits: infraLimits{threads: 2, maxRows: 10, queryTimeout: time.Second}}).resolve()
	if err != nil || l.maxResultBytes != auth.MaxReplyMsgSize {
		t.Errorf("--query-max-bytes 64MiB: %d, %v; want the reply limit itself accepted", l.maxResultBytes, err)
	}
}
