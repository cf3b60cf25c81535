package events

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"google.golang.org/protobuf/proto"
)

// Event is one entry of the cell's log: an envelope around a payload.
//
// Callers fill Stream, OccurredAt (from their injected clock), Actor, the
// causation and correlation ids and Data. The store assigns Position,
// StreamVersion, RecordedAt and IdempotencyKey (copied from the append
// request) when the event is appended; values set by the caller are ignored.
type Event struct {
	Position       int64  // the event's place in the cell's log: 1, 2, 3, ... no gaps
	Stream         string // e.g. "job/alice/web", "task/alice/web/3", "machine/m17"
	StreamVersion  int64  // 1, 2, 3, ... within the stream
	Type           string // the payload's message name, e.g. "TaskScheduled"
	SchemaVersion  int32
	OccurredAt     time.Time
	RecordedAt     time.Time
	Actor          string // the user on whose behalf the event was appended
	CausationID    string // the id of the command or event that caused this one
	CorrelationID  string // shared by every event of one conversation
	IdempotencyKey string // the key of the request that appended the event
	Data           Payload
}

// New returns an event for stream carrying data, with its type and schema
// version filled in from the catalogue.
func New(stream string, occurredAt time.Time, data Payload) Event {
	typ := TypeOf(data)
	var ver int32 = 1
	if k, ok := kinds[typ]; ok {
		ver = k.SchemaVersion
	}
	return Event{Stream: stream, Type: typ, SchemaVersion: ver, OccurredAt: occurredAt, Data: data}
}

// Streams of the cell's log. A stream groups the events of one entity.
func JobStream(user, job string) string       { return "job/" + user + "/" + job }
func MachineStream(machine string) string     { return "machine/" + machine }
func QuotaStream(user string) string          { return "quota/" + user }
func AllocSetStream(user, name string) string { return "alloc/" + user + "/" + name }
func TaskStream(user, job string, index int32) string {
	return "task/" + user + "/" + job + "/" + strconv.Itoa(int(index))
}

// BillingStream holds the cell's price sheets and closed billing periods.
const BillingStream = "billing"

// SchedulerStream holds what the scheduler records of its passes (why
// tasks wait).
const SchedulerStream = "scheduler"

// CellStream holds events about the cell as a whole: leaders, checkpoints.
const CellStream = "cell"

// Errors of the store and codec. Backends wrap them; test with errors.Is.
var (
	// ErrConflict: the log's head is not the expected position.
	ErrConflict = errors.New("events: expected position is stale")
	// ErrFenced: the append carried an epoch other than the current lease's.
	ErrFenced = errors.New("events: epoch is fenced")
	// ErrLeaseHeld: another holder has an unexpired lease.
	ErrLeaseHeld = errors.New("events: lease held by another holder")
	// ErrLeaseLost: the lease was taken over or has expired.
	ErrLeaseLost = errors.New("events: lease lost")
	// ErrEmptyAppend: an append must carry at least one event.
	ErrEmptyAppend = errors.New("events: append of no events")
	// ErrInvalid: an event of the append is malformed.
	ErrInvalid = errors.New("events: invalid event")
	// ErrCorrupt: a stored event cannot be decoded.
	ErrCorrupt = errors.New("events: stored event cannot be decoded")
	// ErrRequestReused: an idempotency key seen before arrived with another
	// request's fingerprint.
	ErrRequestReused = errors.New("events: idempotency key reused for a different request")
	// ErrDuplicateInBatch: a request of an AppendMany was seen before.
	ErrDuplicateInBatch = errors.New("events: a request of the batch was appended before")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("events: store closed")
)

// Encode returns the payload's bytes in the current schema version. The
// encoding is deterministic so that equal events have equal bytes.
func Encode(data Payload) ([]byte, error) {
	if data == nil {
		return nil, fmt.Errorf("%w: nil payload", ErrInvalid)
	}
	if _, ok := kinds[TypeOf(data)]; !ok {
		return nil, fmt.Errorf("%w: type %s is not in the catalogue", ErrInvalid, TypeOf(data))
	}
	return proto.MarshalOptions{Deterministic: true}.Marshal(data)
}

// Decode turns a stored payload of (typ, schemaVersion) into its message,
// upcasting it first when it was written by an older schema version. position
// is only used to name the event in errors.
func Decode(position int64, typ string, schemaVersion int32, raw []byte) (Payload, error) {
	k, ok := kinds[typ]
	if !ok {
		return nil, fmt.Errorf("%w: position %d: unknown event type %q", ErrCorrupt, position, typ)
	}
	if schemaVersion < 1 || schemaVersion > k.SchemaVersion {
		return nil, fmt.Errorf("%w: position %d: type %s has schema version %d, this build reads 1..%d",
			ErrCorrupt, position, typ, schemaVersion, k.SchemaVersion)
	}
	for v := schemaVersion + 1; v <= k.SchemaVersion; v++ {
		up := k.upcasters[v]
		next, err := up(raw)
		if err != nil {
			return nil, fmt.Errorf("%w: position %d: type %s: upcasting to version %d: %v", ErrCorrupt, position, typ, v, err)
		}
		raw = next
	}
	p := k.New()
	if err := (proto.UnmarshalOptions{DiscardUnknown: false}).Unmarshal(raw, p); err != nil {
		return nil, fmt.Errorf("%w: position %d: type %s: %v", ErrCorrupt, position, typ, err)
	}
	return p, nil
}

// Validate checks what the store requires of an event before appending it.
// The error names the event's index in the batch and the field.
func Validate(i int, e *Event) error {
	switch {
	case e.Stream == "":
		return fmt.Errorf("%w: events[%d].stream: must not be empty", ErrInvalid, i)
	case len(e.Stream) > 512:
		return fmt.Errorf("%w: events[%d].stream: longer than 512 bytes", ErrInvalid, i)
	case e.Data == nil:
		return fmt.Errorf("%w: events[%d].data: must not be nil", ErrInvalid, i)
	case e.OccurredAt.IsZero():
		return fmt.Errorf("%w: events[%d].occurred_at: must be set (from the caller's clock)", ErrInvalid, i)
	}
	typ := TypeOf(e.Data)
	if _, ok := kinds[typ]; !ok {
		return fmt.Errorf("%w: events[%d].data: type %s is not in the catalogue", ErrInvalid, i, typ)
	}
	if e.Type != "" && e.Type != typ {
		return fmt.Errorf("%w: events[%d].type: %q does not match the payload's type %s", ErrInvalid, i, e.Type, typ)
	}
	return nil
}
