package writer

import (
	"errors"
	"fmt"
	"time"

	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/events"
)

// Refusal returns the CommandRefused event that records a command Decide
// refused for want of a capability (PermissionDenied): who tried what on
// which target, and the refusal's words, which name the capability.
// Other refusals (invalid specs, quota) are the caller's to see, not the
// cell's history.
func Refusal(cmd commands.Command, err error, now time.Time) (events.Event, bool) {
	var ce *commands.Error
	if !errors.As(err, &ce) || ce.Code != commands.PermissionDenied {
		return events.Event{}, false
	}
	meta := cmd.Metadata()
	name := commands.Name(cmd)
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
	case commands.PromoteUpdate:
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
