package ops

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/corralhq/corral/agent/cgroup"
	"github.com/corralhq/corral/commands/apipb"
)

func (d *doctor) machines(ctx context.Context) *apipb.MachineList {
	c := d.leader
	if c == nil {
		for _, addr := range sortedKeys(d.status) {
			c, _ = d.dial(addr)
			break
		}
	}
	if c == nil {
		return nil
	}
	cctx, cancel := d.ctx(ctx)
	defer cancel()
	ms, err := c.ListMachines(cctx, &apipb.ListMachinesRequest{})
	if err != nil {
		d.add(Finding{Check: "agents", Severity: Fail, Summary: "cannot list the machines: " + grpcMessage(err),
			Fix: "see the masters' logs"})
		return nil
	}
	return ms
}

func (d *doctor) checkAgents(ms []*apipb.MachineView) {
	if _, done := d.rep.Find("agents"); done {
		return
	}
	f := Finding{Check: "agents"}
	if len(d.status) == 0 {
		f.Severity, f.Summary = Skip, "not checked: no master answered"
		d.add(f)
		return
	}
	if len(ms) == 0 {
		f.Severity, f.Summary = Warn, "no machine is registered: tasks have nowhere to run"
		f.Fix = "start an agent on each machine: `corral agent --master <master:port> --name <machine>` (`corral up` starts its own)"
		d.add(f)
		return
	}
	up, draining := 0, 0
	var bad []string
	for _, m := range ms {
		line := fmt.Sprintf("%s (%s): %s", m.Name, m.Address, m.State)
		if m.Draining {
			line += ", draining"
			draining++
		}
		stale := false
		switch {
		case d.leader == nil:
			line += "; last poll unknown (no leader polls)"
		case m.LastPollUs == 0:
			line += "; not polled yet by this leader"
			stale = m.State != "down"
		default:
			age := d.now.Sub(time.UnixMicro(m.LastPollUs))
			line += fmt.Sprintf("; last poll %s ago", age.Round(100*time.Millisecond))
			if m.MissedPolls > 0 {
				line += fmt.Sprintf(", %d missed since", m.MissedPolls)
			}
			stale = age > d.cfg.MaxPollAge
		}
		if m.Reason != "" {
			line += " (" + m.Reason + ")"
		}
		f.Details = append(f.Details, line)
		if m.State == "up" && !stale {
			up++
		} else {
			bad = append(bad, m.Name)
		}
	}
	f.Summary = fmt.Sprintf("%d of %d machines up", up, len(ms))
	if draining > 0 {
		f.Summary += fmt.Sprintf(" (%d draining)", draining)
	}
	if len(bad) > 0 {
		f.Severity = Fail
		f.Summary += "; not answering: " + strings.Join(bad, ", ")
		f.Fix = "on each machine named, check that `corral agent` runs (restart it: its tasks keep running and are adopted) and that the master can reach its --advertise address"
	}
	d.add(f)
}

// checkLossHold says whether the leader's link holds machine loss: too
// many machines miss their polls at once for the fault to be theirs, and
// none is marked down until they answer.
func (d *doctor) checkLossHold(list *apipb.MachineList) {
	f := Finding{Check: "machine loss"}
	switch {
	case d.leader == nil || list == nil:
		f.Severity, f.Summary = Skip, "not checked: no leader answered"
	case list.LossHeldSinceUs == 0:
		f.Summary = "not held: a machine that stops answering is marked down and its tasks placed elsewhere"
	default:
		f.Severity = Fail
		f.Summary = fmt.Sprintf("held for %s: %d of %d machines missed their polls at once, so the master takes the fault for its own or the network's and marks none down",
			// The doctor's clock is read before the leader answers: a hold
			// that began in between is held for no time yet, not a negative one.
			max(d.now.Sub(time.UnixMicro(list.LossHeldSinceUs)), 0).Round(100*time.Millisecond), list.LossHeldMissing, list.LossHeldMachines)
		f.Fix = "check the leader's load (CPU, memory, GC pauses; corral_link_poll_duration_seconds) and the network between it and the agents; " +
			"machines that really died are marked down once the others answer again"
	}
	d.add(f)
}

func (d *doctor) checkClocks(ms []*apipb.MachineView) {
	f := Finding{Check: "clocks"}
	if d.leader == nil {
		f.Severity, f.Summary = Skip, "not checked: only the leader polls agents and sees their clocks"
		d.add(f)
		return
	}
	var worst time.Duration
	var off []string
	n := 0
	for _, m := range ms {
		if m.LastPollUs == 0 {
			continue
		}
		n++
		skew := time.Duration(m.ClockSkewUs) * time.Microsecond
		worst = max(worst, skew.Abs())
		if skew.Abs() > d.cfg.MaxSkew {
			off = append(off, fmt.Sprintf("%s is %s %s", m.Name, skew.Abs().Round(time.Millisecond), aheadBehind(skew)))
		}
	}
	switch {
	case n == 0:
		f.Severity, f.Summary = Skip, "not checked: no agent has been polled yet"
	case len(off) > 0:
		f.Severity = Fail
		f.Summary = fmt.Sprintf("%d agent clock(s) differ from the master's by more than %s", len(off), d.cfg.MaxSkew)
		f.Details = off
		f.Fix = "run NTP (chrony or systemd-timesyncd) on every machine: task times, usage windows and leases are compared across machines"
	default:
		f.Summary = fmt.Sprintf("the clocks of %d agent(s) are within %s of the master's (worst %s)", n, d.cfg.MaxSkew, worst.Round(time.Millisecond))
	}
	d.add(f)
}

func aheadBehind(skew time.Duration) string {
	if skew > 0 {
		return "ahead"
	}
	return "behind"
}

func (d *doctor) checkCgroups(ms []*apipb.MachineView) {
	f := Finding{Check: "cgroups"}
	var sampling []string
	known := 0
	for _, m := range ms {
		if m.CgroupMode == "" {
			continue
		}
		known++
		line := fmt.Sprintf("%s: cgroup %s", m.Name, m.CgroupMode)
		if m.CgroupNote != "" {
			line += " (" + m.CgroupNote + ")"
		}
		f.Details = append(f.Details, line)
		if m.CgroupMode == string(cgroup.ModeSampling) {
			sampling = append(sampling, m.Name)
		}
	}
	switch {
	case known == 0:
		// The log does not keep what each agent told at registration; only
		// the leader's link hears it. Say what this machine offers.
		f.Summary = "the agents' cgroup modes are unknown here (only the leader's link hears them); this machine: " + localCgroups()
		f.Severity = Skip
	case len(sampling) > 0:
		f.Severity = Warn
		f.Summary = fmt.Sprintf("%d of %d agents run without cgroups: memory limits are enforced by sampling and killing, CPU is not limited", len(sampling), known)
		f.Fix = "run the agents as root on a kernel with cgroup v2 (or v1 with the memory, cpu and cpuacct controllers mounted), or give the agent a delegated cgroup subtree (systemd Delegate=yes)"
	default:
		f.Summary = fmt.Sprintf("all %d agents enforce limits with kernel cgroups", known)
	}
	d.add(f)
}

// localCgroups describes this machine's cgroup filesystems, read-only:
// what an agent started here would find (cgroup.Detect's order: v2 with
// the memory and cpu controllers, else v1 with memory, cpu and cpuacct).
func localCgroups() string {
	mounts, err := cgroup.Mounts()
	if err != nil {
		return "cannot read /proc/self/mountinfo: " + err.Error()
	}
	var parts []string
	var v1 []string
	for _, m := range mounts {
		if m.V2 {
			ctrl, _ := os.ReadFile(filepath.Join(m.Path, "cgroup.controllers"))
			have := strings.Fields(string(ctrl))
			usable := slices.Contains(have, "memory") && slices.Contains(have, "cpu")
			w := "writable"
			if syscall.Access(m.Path, 2) != nil {
				w = "not writable by this user"
				usable = false
			}
			verdict := "usable"
			if !usable {
				verdict = "not usable"
			}
			parts = append(parts, fmt.Sprintf("cgroup v2 at %s (controllers: %s; %s): %s", m.Path, strings.Join(have, " "), w, verdict))
		}
		v1 = append(v1, m.Controllers...)
	}
	if len(v1) > 0 {
		slices.Sort(v1)
		v1 = slices.Compact(v1)
		verdict := "usable"
		for _, c := range []string{"memory", "cpu", "cpuacct"} {
			if !slices.Contains(v1, c) {
				verdict = "not usable (no " + c + ")"
				break
			}
		}
		parts = append(parts, fmt.Sprintf("cgroup v1 controllers %s: %s", strings.Join(v1, ","), verdict))
	}
	if len(parts) == 0 {
		return "no cgroup filesystem mounted: agents here would run in sampling mode"
	}
	return strings.Join(parts, "; ")
}
