package commands

import (
	"fmt"
	"time"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// Actor is the identity a command acts for, from the caller's credentials.
type Actor struct {
	User string
	// Admin is the capability to change any job, machine and quota (Borg
	// §2.5). The scheduler and the agent link act as admins.
	Admin bool
}

// callerName names a in a refusal.
func callerName(a Actor) string {
	if a.User == "" {
		return "a caller without a name"
	}
	return a.User
}

// Meta is what every command carries besides its arguments.
type Meta struct {
	Actor Actor
	// RequestID is the client's id for the request. The master appends
	// with Key (the id in the actor's own namespace) as the idempotency
	// key, so a retried request appends nothing; Decide copies it into the
	// events' causation id.
	RequestID string
	// Fingerprint, when set, is a digest of the request (the API's request
	// message without its id): the same id sent again for a different
	// request is refused, not answered as a retry.
	Fingerprint string
	// CorrelationID, when set, is copied into every event.
	CorrelationID string
}

// Key is the idempotency key of the command's request: its id in the
// actor's namespace, so that two users' ids never collide and nobody can
// replay, or take, another's. "" when the command has no id.
func (m Meta) Key() string {
	if m.RequestID == "" {
		return ""
	}
	return m.Actor.User + "/" + m.RequestID
}

// ReusedRequestID is the refusal of a request id that was used before for
// a different request.
func ReusedRequestID(id string, first, last int64) error {
	return refuse(InvalidArgument, "request_id", "%q was used before by you for a different request (it appended positions %d..%d); send a new id for a new request", id, first, last)
}

// Command is one request to change the cell. Each command type lives in its
// own file with its decide method, the one handler for it.
type Command interface {
	// Metadata returns the actor and request id.
	Metadata() Meta
	// decide checks the command against s and returns the events that
	// carry it out, all stamped with now.
	decide(s *projections.State, now time.Time) ([]events.Event, error)
}

// Clock is the time source Decide reads once per command.
type Clock interface{ Now() time.Time }

// ClockFunc adapts a function to Clock.
type ClockFunc func() time.Time

func (f ClockFunc) Now() time.Time { return f() }

// FixedClock always returns the same time: for tests and replays.
type FixedClock time.Time

func (c FixedClock) Now() time.Time { return time.Time(c) }

// maxRequestID matches the store's limit on idempotency keys.
const maxRequestID = 256

// Decide checks cmd against the cell state s and returns the events that
// carry it out, or an *Error saying why not and changing nothing. It is
// pure: it reads s (never changes it) and the clock, once. No events and no
// error means there is nothing to do (an update to the spec in force).
//
// The caller appends the events with ExpectedPosition = s.Position and the
// request id as idempotency key, then applies them to s in order.
func Decide(s *projections.State, cmd Command, clock Clock) ([]events.Event, error) {
	m := cmd.Metadata()
	if m.Actor.User == "" {
		return nil, refuse(Unauthenticated, "actor", "the command carries no identity")
	}
	if len(m.RequestID) > maxRequestID {
		return nil, invalid("request_id", "longer than %d bytes", maxRequestID)
	}
	evs, err := cmd.decide(s, logTime(s, clock.Now()))
	if err != nil {
		return nil, err
	}
	for i := range evs {
		evs[i].Actor = m.Actor.User
		evs[i].CausationID = m.RequestID
		evs[i].CorrelationID = m.CorrelationID
	}
	return evs, nil
}

// logTime is the time a command decides at: the clock's, but never
// before the latest event the state holds. A master whose clock is behind
// the log's (stepped back, or a new leader's slower clock) would otherwise
// stamp events earlier than those before them, and a run starting "before"
// one that ended would be billed for moments already billed elsewhere: the
// log's clock never runs backwards.
func logTime(s *projections.State, now time.Time) time.Time {
	if s.TimeUS > 0 && now.UnixMicro() < s.TimeUS {
		return time.UnixMicro(s.TimeUS).UTC()
	}
	return now
}

func (m Meta) Metadata() Meta { return m }

// mayChange refuses a user changing someone else's job (or alloc set).
func mayChange(a Actor, owner, what string) error {
	if a.Admin || a.User == owner {
		return nil
	}
	return refuse(PermissionDenied, "", "%s belongs to %s: only its owner or an admin may change it, and %s is neither", what, owner, a.User)
}

// mustBeAdmin refuses a command that needs the admin capability.
func mustBeAdmin(a Actor, doing string) error {
	if a.Admin {
		return nil
	}
	return refuse(PermissionDenied, "", "%s needs the admin capability, which %s does not have", doing, a.User)
}

// owner is the user whose job a command names: the given one, or the actor.
func owner(a Actor, user string) string {
	if user != "" {
		return user
	}
	return a.User
}

func jobRef(user, name string) string { return fmt.Sprintf("job %s/%s", user, name) }
