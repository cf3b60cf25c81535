package events

import (
	"errors"
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
	if len(req.IdempotencyKey) > MaxIdempotencyKey {
		return nil, fmt.Errorf("%w: idempotency_key: longer than %d bytes", ErrInvalid, MaxIdempotencyKey)
	}
	if len(req.Fingerprint) > 128 {
		return nil, fmt.Errorf("%w: fingerprint: longer than 128 bytes", ErrInvalid)
	}
	if req.Fingerprint != "" && req.IdempotencyKey == "" {
		return nil, fmt.Errorf("%w: fingerprint: given without an idempotency key", ErrInvalid)
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

// Batch is a validated AppendMany: every request's rows, concatenated.
type Batch struct {
	Reqs  []AppendRequest
	Rows  []Row
	Spans []int // Rows[Spans[i]:Spans[i+1]] belong to Reqs[i]
}

// ValidateBatch checks the requests of an AppendMany (or, with one request,
// of an Append) and encodes their payloads.
func ValidateBatch(reqs []AppendRequest) (*Batch, error) {
	if len(reqs) == 0 {
		return nil, ErrEmptyAppend
	}
	b := &Batch{Reqs: reqs, Spans: make([]int, 0, len(reqs)+1)}
	keys := make(map[string]bool, len(reqs))
	for i := range reqs {
		r := &reqs[i]
		rows, err := ValidateAppend(r)
		if err != nil {
			if len(reqs) == 1 {
				return nil, err
			}
			return nil, fmt.Errorf("requests[%d]: %w", i, err)
		}
		if i > 0 {
			if r.ExpectedPosition != AnyPosition {
				return nil, fmt.Errorf("%w: requests[%d].expected_position: only the first request of a batch names one", ErrInvalid, i)
			}
			if r.Epoch != reqs[0].Epoch {
				return nil, fmt.Errorf("%w: requests[%d].epoch: %d differs from the batch's %d", ErrInvalid, i, r.Epoch, reqs[0].Epoch)
			}
		}
		if r.IdempotencyKey != "" {
			if keys[r.IdempotencyKey] {
				return nil, fmt.Errorf("%w: requests[%d] repeats idempotency key %q", ErrDuplicateInBatch, i, r.IdempotencyKey)
			}
			keys[r.IdempotencyKey] = true
		}
		b.Spans = append(b.Spans, len(b.Rows))
		b.Rows = append(b.Rows, rows...)
	}
	b.Spans = append(b.Spans, len(b.Rows))
	return b, nil
}

// Keys returns the batch's non-empty idempotency keys.
func (b *Batch) Keys() []string {
	var out []string
	for _, r := range b.Reqs {
		if r.IdempotencyKey != "" {
			out = append(out, r.IdempotencyKey)
		}
	}
	return out
}

// Results returns each request's positions once Rows have been assigned.
func (b *Batch) Results() []AppendResult {
	out := make([]AppendResult, len(b.Reqs))
	for i := range b.Reqs {
		out[i] = AppendResult{First: b.Rows[b.Spans[i]].Position, Last: b.Rows[b.Spans[i+1]-1].Position}
	}
	return out
}

// Seen decides what to do when a stored key was found: a single request
// returns its original positions as a duplicate, unless the stored
// fingerprint says the key was used for another request (ErrRequestReused);
// a batch fails whole.
func (b *Batch) Seen(stored Request) ([]AppendResult, error) {
	if len(b.Reqs) == 1 {
		if fp := b.Reqs[0].Fingerprint; fp != "" && stored.Fingerprint != "" && fp != stored.Fingerprint {
			return nil, fmt.Errorf("%w: key %q appended positions %d..%d for another request", ErrRequestReused, stored.Key, stored.First, stored.Last)
		}
		return []AppendResult{{First: stored.First, Last: stored.Last, Duplicate: true}}, nil
	}
	return nil, fmt.Errorf("%w: an idempotency key of the batch is already in the log (positions %d..%d)", ErrDuplicateInBatch, stored.First, stored.Last)
}

// Requests returns what the store keeps of the batch's keyed requests once
// Rows have been assigned.
func (b *Batch) Requests() []Request {
	res := b.Results()
	var out []Request
	for i, r := range b.Reqs {
		if r.IdempotencyKey != "" {
			out = append(out, Request{Key: r.IdempotencyKey, First: res[i].First, Last: res[i].Last, Fingerprint: r.Fingerprint})
		}
	}
	return out
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

// RecordedAt is the recorded time of the next append: the writer's clock,
// but never before the last recorded time, so recorded_at never goes back
// along the log even when writers' clocks disagree or one steps back (time
// lookups such as projections.PositionAt rely on it).
func RecordedAt(clock, last time.Time) time.Time {
	if clock.Before(last) {
		return last
	}
	return clock
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

// DecideAcquire decides what AcquireLease writes, from the stored lease
// (found=false when none).
//
// A holder is one process's incarnation (a replica's name and an id made
// when the process started), never a name alone: every acquisition raises
// the epoch, so a replica restarted under the same name while its old
// process was paused leads at a new epoch, and the old process's appends are
// fenced and its renewals fail (RenewLease matches holder and epoch). Only an
// expired or released lease, or one held by this very holder, can be taken.
func DecideAcquire(stored Lease, found bool, name, holder string, now time.Time, ttl time.Duration) (Lease, error) {
	if holder == "" {
		return Lease{}, fmt.Errorf("%w: holder: must not be empty", ErrInvalid)
	}
	if ttl <= 0 {
		return Lease{}, fmt.Errorf("%w: ttl: must be positive", ErrInvalid)
	}
	if found && stored.Holder != holder && now.Before(stored.ExpiresAt) {
		return stored, fmt.Errorf("%w: %q holds %q at epoch %d until %s", ErrLeaseHeld, stored.Holder, name, stored.Epoch, stored.ExpiresAt.UTC().Format(time.RFC3339Nano))
	}
	// A new holding gets a new epoch, even for the same holder taking its
	// own live lease again (after stepping down): whatever it appended
	// under the earlier holding is fenced.
	return Lease{Name: name, Holder: holder, Epoch: stored.Epoch + 1, ExpiresAt: LeaseExpiry(now, ttl)}, nil
}

// LeaseExpiry is when a lease taken or renewed at now for ttl expires, to
// the microsecond that every store keeps.
func LeaseExpiry(now time.Time, ttl time.Duration) time.Time {
	return now.Add(ttl).Truncate(time.Microsecond).UTC()
}

// ReleasedExpiry is the expiry of a released lease: before any clock, so
// the next holder takes it at once.
func ReleasedExpiry() time.Time { return time.Unix(0, 0).UTC() }

// LeaseLost is the refusal of a renewal by a holder that no longer holds l
// at its epoch.
func LeaseLost(l Lease) error {
	return fmt.Errorf("%w: %q no longer holds %q at epoch %d", ErrLeaseLost, l.Holder, l.Name, l.Epoch)
}

// KeepLeading is a leader's rule for its renewal's answer, for the master
// and the cell simulation alike: a renewed lease is kept; a lost one
// (ErrLeaseLost: another holder, or an older epoch) ends the leadership;
// when the store cannot be reached the leader keeps leading until the
// lease it held would have expired by its own clock, then stops (another
// replica may take it then, and this one's appends would be fenced
// anyway). why says what ended it.
func KeepLeading(held Lease, err error, now time.Time) (keep bool, why string) {
	switch {
	case err == nil:
		return true, ""
	case errors.Is(err, ErrLeaseLost):
		return false, err.Error()
	case now.After(held.ExpiresAt):
		return false, "lease expired while the store was unreachable: " + err.Error()
	}
	return true, ""
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
