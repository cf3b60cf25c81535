package commands

import (
	"time"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// DrainMachine stops new placements on a machine and moves what runs
// there elsewhere (evictions for projections.DrainReason), so it can be
// taken out for maintenance. Evictions keep each job's disruption budget
// (stepDrain): this command evicts what the budgets allow now, and
// RollingUpdateStep evicts the rest as the replacements settle; the machine
// stays draining meanwhile. Force evicts everything at once, budgets or
// not. Draining=false opens the machine again and stops the drain.
type DrainMachine struct {
	Meta
	Machine  string
	Draining bool
	Force    bool // evict every task now, below budgets if need be
	Reason   string
}

func (c DrainMachine) decide(s *projections.State, now time.Time) ([]events.Event, error) {
	if err := mustBeAdmin(c.Actor, "draining a machine"); err != nil {
		return nil, err
	}
	m := s.Machines[c.Machine]
	if m == nil {
		return nil, refuse(NotFound, "machine", "machine %q is not registered", c.Machine)
	}
	if c.Force && !c.Draining {
		return nil, invalid("force", "only a drain can be forced, not an undrain")
	}
	if !c.Draining && !m.Draining {
		return nil, nil
	}
	b := newDraft(s, now)
	b.add(events.MachineStream(m.Name), &events.MachineDrainSet{Machine: m.Name, Draining: c.Draining, Reason: c.Reason})
	switch {
	case c.Force:
		b.clearMachine(m, true, projections.DrainReason)
	case c.Draining:
		b.stepDrain(m)
	}
	b.finishJobs()
	return b.evs, nil
}
