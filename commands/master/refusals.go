package master

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// refusal returns the CommandRefused event that records a command Decide
// refused for want of a capability (PermissionDenied): who tried what on
// which target, and the refusal's words, which name the capability.
// Other refusals (invalid specs, quota) are the caller's to see, not the
// cell's history.
func refusal(cmd commands.Command, err error, now time.Time) (events.Event, bool) {
	var ce *commands.Error
	if !errors.As(err, &ce) || ce.Code != commands.PermissionDenied {
		return events.Event{}, false
	}
	meta := cmd.Metadata()
	name := fmt.Sprintf("%T", cmd)
	name = name[strings.LastIndex(name, ".")+1:]
	ev := events.New(events.CellStream, now, &events.CommandRefused{
		Actor: meta.Actor.User, Command: name, Code: "PermissionDenied", Reason: ce.Error(), Target: target(cmd),
	})
	ev.Actor = meta.Actor.User
	ev.CausationID = meta.RequestID
	ev.CorrelationID = meta.CorrelationID
	return ev, true
}

// target names what a command acts on, as "job user/name" and the like.
func target(cmd commands.Command) string {
	a := cmd.Metadata().Actor.User
	or := func(u string) string {
		if u != "" {
			return u
		}
		return a
	}
	switch c := cmd.(type) {
	case commands.UpdateJob:
		if c.Spec != nil {
			return "job " + or(c.User) + "/" + c.Spec.GetName()
		}
		return "jobs " + or(c.User) + " " + c.Selector
	case commands.KillJob:
		if c.Name != "" {
			return "job " + or(c.User) + "/" + c.Name
		}
		return "jobs " + or(c.User) + " " + c.Selector
	case commands.KillTask:
		return fmt.Sprintf("task %s/%s/%d", or(c.User), c.Job, c.Index)
	case commands.CommitUpdate:
		return "job " + or(c.User) + "/" + c.Job
	case commands.RollbackUpdate:
		return "job " + or(c.User) + "/" + c.Job
	case commands.SetQuota:
		return "quota " + c.User + " " + c.Band
	case commands.RemoveAllocSet:
		return "alloc set " + or(c.User) + "/" + c.Name
	case commands.DrainMachine:
		return "machine " + c.Machine
	case commands.RemoveMachine:
		return "machine " + c.Machine
	}
	return ""
}

// recordRefusalsLocked appends a batch's refusals once the batch is in the
// log (m.mu held, as leader). A failure is logged, not returned: the
// refused callers have their answers already.
func (m *Master) recordRefusalsLocked(ctx context.Context, evs []events.Event) {
	epoch := m.Epoch()
	if len(evs) == 0 || epoch == 0 {
		return
	}
	res, err := m.store.Append(ctx, events.AppendRequest{ExpectedPosition: m.state.Position, Epoch: epoch, Events: evs})
	if err != nil {
		m.log.Warn("recording refused commands", "count", len(evs), "err", err)
		return
	}
	for i := range evs {
		evs[i].Position = res.First + int64(i)
		if err := projections.Apply(m.state, evs[i]); err != nil {
			m.log.Error("applying a recorded refusal", "err", err)
			return
		}
	}
}
