package commands

import (
	"time"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// RecordPendingReasons records why pending tasks wait, as a scheduling
// pass explained it (one reason and hint per group of a job's tasks). Only
// the tasks still pending whose recorded reason or hint differs are
// written, in one PendingReasonsChanged, so that a queue waiting for hours
// for the same reason costs one event per task, not one per pass. Nothing
// to record is not an error: it decides no event.
type RecordPendingReasons struct {
	Meta
	Reasons []*events.PendingReason
}

// maxReasonBytes bounds a reason or hint as recorded.
const maxReasonBytes = 1024

func (c RecordPendingReasons) decide(s *projections.State, now time.Time) ([]events.Event, error) {
	if err := mustBeAdmin(c.Actor, "recording why tasks wait"); err != nil {
		return nil, err
	}
	var out []*events.PendingReason
	for _, r := range c.Reasons {
		reason, hint := truncate(r.GetReason(), maxReasonBytes), truncate(r.GetHint(), maxReasonBytes)
		var changed []int32
		for _, i := range r.GetIndexes() {
			t := s.Task(r.GetUser(), r.GetJob(), i)
			if t == nil || t.State != projections.TaskPending || (t.WaitReason == reason && t.WaitHint == hint) {
				continue
			}
			changed = append(changed, i)
		}
		if len(changed) > 0 {
			out = append(out, &events.PendingReason{User: r.GetUser(), Job: r.GetJob(), Indexes: changed, Reason: reason, Hint: hint})
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	b := newDraft(s, now)
	b.add(events.SchedulerStream, &events.PendingReasonsChanged{Reasons: out})
	return b.evs, nil
}

// truncate cuts s to at most n bytes, on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}
