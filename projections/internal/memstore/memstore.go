package memstore

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/corralhq/corral/events"
)

// Store is the in-memory log.
type Store struct {
	mu          sync.RWMutex
	now         func() time.Time
	log         []events.Event // log[i] has position i+1
	versions    map[string]int64
	keys        map[string]events.Request
	checkpoints map[string][]events.Checkpoint // by position
	leases      map[string]events.Lease
	notify      *events.Notifier
	// SkipValidation appends without encoding payloads, for building large
	// benchmark logs quickly. Set before use.
	SkipValidation bool
}

// New returns an empty store whose recorded_at comes from now.
func New(now func() time.Time) *Store {
	return &Store{now: now, versions: map[string]int64{}, keys: map[string]events.Request{},
		checkpoints: map[string][]events.Checkpoint{}, leases: map[string]events.Lease{}, notify: events.NewNotifier()}
}

var _ events.Store = (*Store)(nil)

func (s *Store) Append(ctx context.Context, req events.AppendRequest) (events.AppendResult, error) {
	rs, err := s.AppendMany(ctx, []events.AppendRequest{req})
	if err != nil {
		return events.AppendResult{}, err
	}
	return rs[0], nil
}

func (s *Store) AppendMany(ctx context.Context, reqs []events.AppendRequest) ([]events.AppendResult, error) {
	var b *events.Batch
	if s.SkipValidation {
		b = &events.Batch{Reqs: reqs}
		for _, r := range reqs {
			b.Spans = append(b.Spans, len(b.Rows))
			for _, e := range r.Events {
				row := events.Row{Event: e}
				row.Type, row.IdempotencyKey = events.TypeOf(e.Data), r.IdempotencyKey
				b.Rows = append(b.Rows, row)
			}
		}
		b.Spans = append(b.Spans, len(b.Rows))
		if len(b.Rows) == 0 {
			return nil, events.ErrEmptyAppend
		}
	} else {
		var err error
		if b, err = events.ValidateBatch(reqs); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range b.Keys() {
		if r, ok := s.keys[k]; ok {
			return b.Seen(r)
		}
	}
	head := int64(len(s.log))
	var epoch int64
	if l, ok := s.leases[events.LeaderLease]; ok {
		epoch = l.Epoch
	}
	if err := events.CheckAppend(&reqs[0], head, epoch); err != nil {
		return nil, err
	}
	events.AssignRows(b.Rows, head, s.versions, s.now())
	for i := range reqs {
		for k, e := range reqs[i].Events {
			ev := b.Rows[b.Spans[i]+k].Event
			ev.Data = e.Data // shared, never copied: tests must not change payloads
			s.log = append(s.log, ev)
		}
	}
	results := b.Results()
	for _, r := range b.Requests() {
		s.keys[r.Key] = r
	}
	s.notify.Notify()
	return results, nil
}

func (s *Store) Read(ctx context.Context, from int64, limit int) ([]events.Event, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if from < 1 {
		from = 1
	}
	if from > int64(len(s.log)) || limit <= 0 {
		return nil, nil
	}
	end := min(from-1+int64(limit), int64(len(s.log)))
	return append([]events.Event(nil), s.log[from-1:end]...), nil
}

func (s *Store) ReadStream(ctx context.Context, stream string) ([]events.Event, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []events.Event
	for _, e := range s.log {
		if e.Stream == stream {
			out = append(out, e)
		}
	}
	return out, nil
}

func (s *Store) Head(ctx context.Context) (int64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return int64(len(s.log)), nil
}

func (s *Store) Subscribe(after int64) *events.Subscription {
	return events.NewSubscription(s, s.notify, after, 1000, 10*time.Millisecond)
}

func (s *Store) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (events.Lease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	stored, found := s.leases[name]
	l, err := events.DecideAcquire(stored, found, name, holder, s.now(), ttl)
	if err != nil {
		return l, err
	}
	s.leases[name] = l
	return l, nil
}

func (s *Store) RenewLease(ctx context.Context, l events.Lease, ttl time.Duration) (events.Lease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.leases[l.Name]
	if !ok || cur.Holder != l.Holder || cur.Epoch != l.Epoch {
		return events.Lease{}, events.ErrLeaseLost
	}
	cur.ExpiresAt = s.now().Add(ttl)
	s.leases[l.Name] = cur
	return cur, nil
}

func (s *Store) ReleaseLease(ctx context.Context, l events.Lease) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.leases[l.Name]; ok && cur.Holder == l.Holder && cur.Epoch == l.Epoch {
		cur.ExpiresAt = time.Time{}
		s.leases[l.Name] = cur
	}
	return nil
}

func (s *Store) Request(ctx context.Context, key string) (events.Request, bool, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	r, ok := s.keys[key]
	return r, ok, nil
}

func (s *Store) CurrentLease(ctx context.Context, name string) (events.Lease, bool, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	l, ok := s.leases[name]
	return l, ok, nil
}

func (s *Store) SaveCheckpoint(ctx context.Context, c events.Checkpoint) error {
	if c.Name == "" {
		return fmt.Errorf("%w: checkpoint name: must not be empty", events.ErrInvalid)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cps := s.checkpoints[c.Name]
	i := sort.Search(len(cps), func(i int) bool { return cps[i].Position >= c.Position })
	if i < len(cps) && cps[i].Position == c.Position {
		cps[i] = c
	} else {
		cps = append(cps, events.Checkpoint{})
		copy(cps[i+1:], cps[i:])
		cps[i] = c
	}
	s.checkpoints[c.Name] = cps
	return nil
}

func (s *Store) LoadCheckpoint(ctx context.Context, name string, atOrBefore int64) (events.Checkpoint, bool, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	cps := s.checkpoints[name]
	i := sort.Search(len(cps), func(i int) bool { return cps[i].Position > atOrBefore })
	if i == 0 {
		return events.Checkpoint{}, false, nil
	}
	return cps[i-1], true, nil
}

// Checkpoints returns how many checkpoints of name are stored.
func (s *Store) Checkpoints(name string) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.checkpoints[name])
}

func (s *Store) Close() error { return nil }

// Log returns the stored events, in position order. The slice is the
// store's own: read it, never change it.
func (s *Store) Log() []events.Event {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.log
}
