package projections

import (
	"errors"
	"fmt"

	"github.com/corralhq/corral/events"
)

// ErrGap: an event's position is beyond the next one; the caller missed
// events and must read them before applying this one.
var ErrGap = errors.New("projections: event position leaves a gap")

// maxTaskIndex bounds the task slice an event can grow, so a corrupt index
// cannot allocate the heap away. Specs allow far fewer tasks.
const maxTaskIndex = 1 << 20

// Apply folds one event into s: a type switch on the payload that changes
// only s. It does no I/O and reads no clock; the event's occurred_at is the
// only time it knows.
//
// An event at or before s.Position was applied already and is ignored, so
// at-least-once delivery is harmless. An event with position 0 is taken as
// the next one (events decided but not yet appended). An event beyond the
// next position returns ErrGap and changes nothing. An event that names
// something the state does not hold (a task of an unknown job, a start on
// another machine) moves only the position and counts in s.Skipped; event
// types the projection does not know are ignored. The state takes ownership
// of the payload: callers must not change it afterwards.
func Apply(s *State, e events.Event) error {
	pos := e.Position
	if pos == 0 {
		pos = s.Position + 1
	}
	if pos <= s.Position {
		return nil
	}
	if pos != s.Position+1 {
		return fmt.Errorf("%w: the state is at position %d, the event at %d", ErrGap, s.Position, pos)
	}
	s.Position = pos
	if !e.OccurredAt.IsZero() {
		// The state's clock never runs backwards, even over a log written
		// by a master whose clock was behind the log's (commands decide at
		// the log's time since): a run's start, a stop and a usage
		// window's bounds are read from it, and a moment is billed once.
		s.TimeUS = max(s.TimeUS, e.OccurredAt.UnixMicro())
	}
	if !s.fold(pos, e.Data) {
		s.Skipped++
	} else if k, ok := jobChange(e.Data); ok {
		if j := s.Jobs[k]; j != nil {
			j.ChangedPos = pos
			if _, submitted := e.Data.(*events.JobSubmitted); !submitted {
				s.UpdatesChangedPos = pos
			}
		}
	}
	return nil
}

// jobChange names the job whose spec or update an event changes.
func jobChange(d events.Payload) (JobKey, bool) {
	switch p := d.(type) {
	case *events.JobSubmitted:
		return JobKey{p.Spec.GetUser(), p.Spec.GetName()}, true
	case *events.JobUpdated:
		return JobKey{p.Spec.GetUser(), p.Spec.GetName()}, true
	case *events.JobUpdateCommitted:
		return JobKey{p.User, p.Job}, true
	case *events.JobUpdateRolledBack:
		return JobKey{p.User, p.Job}, true
	case *events.JobUpdateHalted:
		return JobKey{p.User, p.Job}, true
	case *events.JobUpdatePromoted:
		return JobKey{p.User, p.Job}, true
	}
	return JobKey{}, false
}

// ApplyAll applies events in order and stops at the first error.
func ApplyAll(s *State, evs []events.Event) error {
	for i := range evs {
		if err := Apply(s, evs[i]); err != nil {
			return err
		}
	}
	return nil
}

// fold changes s by one payload and reports whether the payload made sense
// against s. Each case is one call so the switch stays a table of what
// every event type does.
func (s *State) fold(pos int64, d events.Payload) bool {
	switch p := d.(type) {
	case *events.UsageReported:
		return s.usageReported(p)
	case *events.TaskScheduled:
		return s.taskScheduled(pos, p)
	case *events.TaskStarted:
		return s.taskStarted(p)
	case *events.TaskSubmitted:
		return s.taskSubmitted(pos, p)
	case *events.TaskFinished:
		return s.taskFinished(pos, p)
	case *events.TaskFailed:
		return s.taskFailed(pos, p)
	case *events.TaskEvicted:
		return s.taskEvicted(pos, p)
	case *events.TaskKilled:
		return s.taskKilled(pos, p)
	case *events.TaskStopped:
		return s.taskStopped(pos, p)
	case *events.TaskLost:
		return s.taskLost(pos, p)
	case *events.TaskUpdated:
		return s.taskUpdated(pos, p)
	case *events.TaskHealthChanged:
		return s.taskHealthChanged(p)
	case *events.PendingReasonsChanged:
		return s.pendingReasons(p)
	case *events.ReservationEstimated:
		return s.reservationEstimated(pos, p)
	case *events.JobSubmitted:
		return s.jobSubmitted(p)
	case *events.JobUpdated:
		return s.jobUpdated(p)
	case *events.JobUpdateCommitted:
		return s.jobUpdateCommitted(p)
	case *events.JobUpdateHalted:
		return s.jobUpdateHalted(p)
	case *events.JobUpdatePromoted:
		return s.jobUpdatePromoted(p)
	case *events.JobUpdateRolledBack:
		return s.jobRolledBack(p)
	case *events.JobKilled:
		return s.jobEnded(pos, p.User, p.Job, JobKilledEnd, p.Reason)
	case *events.JobFinished:
		return s.jobEnded(pos, p.User, p.Job, JobFinishedEnd, "")
	case *events.MachineRegistered:
		return s.machineRegistered(pos, p)
	case *events.MachineUpdated:
		return s.machineUpdated(pos, p)
	case *events.MachineDrainSet:
		return s.machineDrainSet(pos, p)
	case *events.MachineDown:
		return s.machineDown(pos, p)
	case *events.MachineUp:
		return s.machineUp(pos, p)
	case *events.MachineRemoved:
		return s.machineRemoved(pos, p)
	case *events.QuotaSet:
		return s.quotaSet(p)
	case *events.PriceSheetSet:
		return s.priceSheetSet(pos, p)
	case *events.BillingPeriodClosed:
		return s.billingPeriodClosed(pos, p)
	case *events.AllocSetCreated:
		return s.allocSetCreated(p)
	case *events.AllocSetRemoved:
		return s.allocSetRemoved(pos, p)
	case *events.AllocScheduled:
		return s.allocScheduled(pos, p)
	case *events.AllocEvicted:
		return s.allocEvicted(pos, p)
	case *events.LeaderElected:
		return s.leaderElected(p)
	case nil:
		return false
	}
	return true // a type this projection has no use for
}

func (s *State) priceSheetSet(pos int64, p *events.PriceSheetSet) bool {
	s.PriceSheets = append(s.PriceSheets, PriceSheet{Position: pos, SetUS: s.TimeUS, Sheet: p})
	return true
}

func (s *State) leaderElected(p *events.LeaderElected) bool {
	s.Leader, s.LeaderEpoch, s.LeaderAddress = p.Holder, p.Epoch, p.Address
	return true
}

func (s *State) quotaSet(p *events.QuotaSet) bool {
	b, ok := ParseBand(p.Band)
	if !ok || p.User == "" {
		return false
	}
	setOrDelete(s.Quotas, UserBand{p.User, b}, ResourcesOf(p.Resources))
	return true
}

func (s *State) billingPeriodClosed(pos int64, p *events.BillingPeriodClosed) bool {
	if _, closed := s.ClosedPeriods[p.PeriodStartUs]; closed {
		return false
	}
	s.ClosedPeriods[p.PeriodStartUs] = pos
	return true
}
