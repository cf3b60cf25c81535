package commands

import (
	"time"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// RecordLossHold records that the leader's agent link holds machine loss
// (Ended zero: the hold started at Since) or held it from Since to Ended:
// Missing of the cell's Machines (not down) went unanswered at once, and
// the link marked none down (agentlink.HoldLoss). It changes no state: it
// says, in the log, why machines that missed their polls were not marked
// down. Only the link (an admin) records it.
type RecordLossHold struct {
	Meta
	Since, Ended      time.Time
	Missing, Machines int
}

func (c RecordLossHold) decide(s *projections.State, now time.Time) ([]events.Event, error) {
	if err := mustBeAdmin(c.Actor, "recording a loss hold"); err != nil {
		return nil, err
	}
	switch {
	case c.Since.IsZero():
		return nil, refuse(InvalidArgument, "since", "a loss hold needs the time it started")
	case !c.Ended.IsZero() && c.Ended.Before(c.Since):
		return nil, refuse(InvalidArgument, "ended", "the hold ended at %s, before it started at %s", c.Ended.UTC().Format(time.RFC3339Nano), c.Since.UTC().Format(time.RFC3339Nano))
	case c.Machines < 1 || c.Machines > maxLossHoldMachines:
		return nil, refuse(InvalidArgument, "machines", "%d machines: want 1 to %d", c.Machines, maxLossHoldMachines)
	case c.Missing < 0 || c.Missing > c.Machines:
		return nil, refuse(InvalidArgument, "missing", "%d machines missing of %d: want 0 to %d", c.Missing, c.Machines, c.Machines)
	}
	var ended int64
	if !c.Ended.IsZero() {
		ended = c.Ended.UnixMicro()
	}
	b := newDraft(s, now)
	b.add(events.CellStream, &events.MachineLossHeld{SinceUs: c.Since.UnixMicro(), EndedUs: ended, Missing: int32(c.Missing), Machines: int32(c.Machines)})
	return b.evs, nil
}

// maxLossHoldMachines bounds a hold's machine count: far above any cell.
const maxLossHoldMachines = 1 << 20
