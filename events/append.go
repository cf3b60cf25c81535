package events

import (
	"fmt"
	"runtime"
	"sync"
	"time"
)

// Row is an event as a backend stores it: the envelope with its payload
// encoded. Backends share ValidateAppend, CheckAppend and AssignRows so the
// rules of an append are written once.
type Row struct {
	Event
	Payload []byte
}

// ValidateAppend checks a request before any I/O and encodes its payloads.
// Bad input is reported with the event's index and the field.
func ValidateAppend(req *AppendRequest) ([]Row, error) {
	if len(req.Events) == 0 {
		return nil, ErrEmptyAppend
	}
	if req.ExpectedPosition < AnyPosition {
		return nil, fmt.Errorf("%w: expected_position: %d is neither a position nor AnyPosition", ErrInvalid, req.ExpectedPosition)
	}
	if req.Epoch < 0 {
		return nil, fmt.Errorf("%w: epoch: must not be negative", ErrInvalid)
	}
	if len(req.IdempotencyKey) > 256 {
		return nil, fmt.Errorf("%w: idempotency_key: longer than 256 bytes", ErrInvalid)
	}
	rows := make([]Row, len(req.Events))
	for i := range req.Events {
		e := &req.Events[i]
		if err := Validate(i, e); err != nil {
			return nil, err
		}
		raw, err := Encode(e.Data)
		if err != nil {
			return nil, fmt.Errorf("events[%d].data: %w", i, err)
		}
		rows[i] = Row{Event: *e, Payload: raw}
		// Both backends keep microseconds; truncate here so they agree.
		rows[i].OccurredAt = e.OccurredAt.Truncate(time.Microsecond).UTC()
		rows[i].Type = TypeOf(e.Data)
		rows[i].SchemaVersion = kinds[rows[i].Type].SchemaVersion
		rows[i].IdempotencyKey = req.IdempotencyKey
	}
	return rows, nil
}

// CheckAppend applies the fencing and optimistic-concurrency rules against
// what the append transaction read: the head of the log and the leader
// lease's epoch (leaseEpoch 0 when no lease was ever taken).
func CheckAppend(req *AppendRequest, head, leaseEpoch int64) error {
	if req.Epoch != leaseEpoch {
		return fmt.Errorf("%w: append carries epoch %d, the current leader's epoch is %d", ErrFenced, req.Epoch, leaseEpoch)
	}
	if req.ExpectedPosition != AnyPosition && req.ExpectedPosition != head {
		return fmt.Errorf("%w: expected position %d, head is %d", ErrConflict, req.ExpectedPosition, head)
	}
	return nil
}

// AssignRows gives rows their positions (head+1, ...), stream versions
// (continuing versions, the current version of each stream) and recorded time.
// versions is updated in place.
func AssignRows(rows []Row, head int64, versions map[string]int64, recordedAt time.Time) {
	for i := range rows {
		r := &rows[i]
		r.Position = head + int64(i) + 1
		versions[r.Stream]++
		r.StreamVersion = versions[r.Stream]
		r.RecordedAt = recordedAt.Truncate(time.Microsecond).UTC()
	}
}

// Streams returns the distinct streams of rows, in first-seen order.
func Streams(rows []Row) []string {
	seen := make(map[string]bool, len(rows))
	var out []string
	for i := range rows {
		if !seen[rows[i].Stream] {
			seen[rows[i].Stream] = true
			out = append(out, rows[i].Stream)
		}
	}
	return out
}

// DecodeRow fills e.Data from a stored payload. The error names the position
// and the type.
func DecodeRow(e *Event, raw []byte) error {
	p, err := Decode(e.Position, e.Type, e.SchemaVersion, raw)
	if err != nil {
		return err
	}
	e.Data = p
	return nil
}

// LeaseDecision is what AcquireLease should write, decided from the stored
// lease (found=false when none).
func DecideAcquire(stored Lease, found bool, name, holder string, now time.Time, ttl time.Duration) (Lease, error) {
	if holder == "" {
		return Lease{}, fmt.Errorf("%w: holder: must not be empty", ErrInvalid)
	}
	if ttl <= 0 {
		return Lease{}, fmt.Errorf("%w: ttl: must be positive", ErrInvalid)
	}
	next := Lease{Name: name, Holder: holder, ExpiresAt: now.Add(ttl).Truncate(time.Microsecond).UTC()}
	switch {
	case !found:
		next.Epoch = 1
	case stored.Holder == holder && now.Before(stored.ExpiresAt):
		next.Epoch = stored.Epoch // still ours: extend
	case stored.Holder != holder && now.Before(stored.ExpiresAt):
		return stored, fmt.Errorf("%w: %q holds %q at epoch %d until %s", ErrLeaseHeld, stored.Holder, name, stored.Epoch, stored.ExpiresAt.UTC().Format(time.RFC3339Nano))
	default:
		// Expired or released: a new holding gets a new epoch, even for the
		// same holder, so appends it started under the lapsed lease are fenced.
		next.Epoch = stored.Epoch + 1
	}
	return next, nil
}

// DecodeAll fills evs[i].Data from raw[i]. Large pages are decoded on every
// core, since decoding is most of the cost of reading the log. On failure the
// error of the lowest position is returned.
func DecodeAll(evs []Event, raw [][]byte) error {
	const perWorker = 256
	workers := runtime.GOMAXPROCS(0)
	if len(evs) < 2*perWorker || workers == 1 {
		for i := range evs {
			if err := DecodeRow(&evs[i], raw[i]); err != nil {
				return err
			}
		}
		return nil
	}
	chunk := (len(evs) + workers - 1) / workers
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		lo, hi := w*chunk, min((w+1)*chunk, len(evs))
		if lo >= hi {
			break
		}
		wg.Add(1)
		go func(w, lo, hi int) {
			defer wg.Done()
			for i := lo; i < hi; i++ {
				if err := DecodeRow(&evs[i], raw[i]); err != nil {
					errs[w] = err
					return
				}
			}
		}(w, lo, hi)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
