package ops

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corralhq/corral/events"
)

// storeMetrics are the series of InstrumentStore.
type storeMetrics struct {
	appended   *prometheus.CounterVec   // type
	requests   *prometheus.CounterVec   // op, result
	duration   *prometheus.HistogramVec // op
	batch      prometheus.Histogram
	checkpoint *checkpointCollector
}

func newStoreMetrics(reg prometheus.Registerer) *storeMetrics {
	m := &storeMetrics{
		appended: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corral_events_appended_total",
			Help: "Events appended to the cell's log by this process, by event type."}, []string{"type"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corral_store_requests_total",
			Help: "Requests to the event store by operation and result (ok, duplicate, conflict, fenced, lease_held, lease_lost, not_found, error)."},
			[]string{"op", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "corral_store_request_duration_seconds",
			Help:    "Latency of event store requests by operation; op=\"append_many\" is the write path's group commit.",
			Buckets: prometheus.ExponentialBuckets(0.0002, 3, 12)}, []string{"op"}),
		batch: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "corral_store_append_batch_requests",
			Help:    "Commands per group commit (requests per AppendMany).",
			Buckets: prometheus.ExponentialBuckets(1, 2, 10)}),
		checkpoint: &checkpointCollector{},
	}
	m.appended = register(reg, m.appended)
	m.requests = register(reg, m.requests)
	m.duration = register(reg, m.duration)
	m.batch = register(reg, m.batch)
	m.checkpoint = register(reg, m.checkpoint)
	return m
}

// register registers c, or returns the collector already registered in its
// place (two stores or masters instrumented into one registry share series).
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if reg == nil {
		return c
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic("ops: registering metrics: " + err.Error())
	}
	return c
}

// Store is an events.Store that records metrics; see InstrumentStore.
type Store struct {
	inner events.Store
	m     *storeMetrics
}

// InstrumentStore returns store recording, in reg: events appended by type
// (corral_events_appended_total), every operation's result and latency
// (corral_store_requests_total, corral_store_request_duration_seconds), the
// commands per group commit, and the newest checkpoint saved or loaded
// (corral_checkpoint_position, corral_checkpoint_age_seconds,
// corral_checkpoint_bytes). Every method delegates to store; Unwrap returns
// it. Closing the result closes store.
func InstrumentStore(store events.Store, reg prometheus.Registerer) *Store {
	return &Store{inner: store, m: newStoreMetrics(reg)}
}

var _ events.Store = (*Store)(nil)

// Unwrap returns the decorated store.
func (s *Store) Unwrap() events.Store { return s.inner }

func resultOf(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, events.ErrConflict):
		return "conflict"
	case errors.Is(err, events.ErrFenced):
		return "fenced"
	case errors.Is(err, events.ErrDuplicateInBatch):
		return "duplicate"
	case errors.Is(err, events.ErrLeaseHeld):
		return "lease_held"
	case errors.Is(err, events.ErrLeaseLost):
		return "lease_lost"
	}
	return "error"
}

func (s *Store) observe(op string, start time.Time, err error) {
	s.m.duration.WithLabelValues(op).Observe(time.Since(start).Seconds())
	s.m.requests.WithLabelValues(op, resultOf(err)).Inc()
}

func (s *Store) countAppended(req events.AppendRequest, res events.AppendResult) {
	if res.Duplicate {
		s.m.requests.WithLabelValues("append_request", "duplicate").Inc()
		return
	}
	for _, e := range req.Events {
		typ := e.Type
		if typ == "" && e.Data != nil {
			typ = events.TypeOf(e.Data)
		}
		s.m.appended.WithLabelValues(typ).Inc()
	}
}

func (s *Store) Append(ctx context.Context, req events.AppendRequest) (events.AppendResult, error) {
	start := time.Now()
	res, err := s.inner.Append(ctx, req)
	s.observe("append", start, err)
	if err == nil {
		s.m.batch.Observe(1)
		s.countAppended(req, res)
	}
	return res, err
}

func (s *Store) AppendMany(ctx context.Context, reqs []events.AppendRequest) ([]events.AppendResult, error) {
	start := time.Now()
	res, err := s.inner.AppendMany(ctx, reqs)
	s.observe("append_many", start, err)
	if err == nil {
		s.m.batch.Observe(float64(len(reqs)))
		for i := range reqs {
			if i < len(res) {
				s.countAppended(reqs[i], res[i])
			}
		}
	}
	return res, err
}

func (s *Store) Read(ctx context.Context, from int64, limit int) ([]events.Event, error) {
	start := time.Now()
	evs, err := s.inner.Read(ctx, from, limit)
	s.observe("read", start, err)
	return evs, err
}

func (s *Store) ReadStream(ctx context.Context, stream string) ([]events.Event, error) {
	start := time.Now()
	evs, err := s.inner.ReadStream(ctx, stream)
	s.observe("read_stream", start, err)
	return evs, err
}

func (s *Store) Head(ctx context.Context) (int64, error) {
	start := time.Now()
	h, err := s.inner.Head(ctx)
	s.observe("head", start, err)
	return h, err
}

// Subscribe delegates: the subscription's reads go to the inner store
// directly (a tail polls often; its latency is the projection's lag).
func (s *Store) Subscribe(after int64) *events.Subscription { return s.inner.Subscribe(after) }

func (s *Store) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (events.Lease, error) {
	start := time.Now()
	l, err := s.inner.AcquireLease(ctx, name, holder, ttl)
	s.observe("acquire_lease", start, err)
	return l, err
}

func (s *Store) RenewLease(ctx context.Context, l events.Lease, ttl time.Duration) (events.Lease, error) {
	start := time.Now()
	nl, err := s.inner.RenewLease(ctx, l, ttl)
	s.observe("renew_lease", start, err)
	return nl, err
}

func (s *Store) ReleaseLease(ctx context.Context, l events.Lease) error {
	start := time.Now()
	err := s.inner.ReleaseLease(ctx, l)
	s.observe("release_lease", start, err)
	return err
}

func (s *Store) Request(ctx context.Context, key string) (events.Request, bool, error) {
	start := time.Now()
	r, ok, err := s.inner.Request(ctx, key)
	s.observe("request", start, err)
	return r, ok, err
}

func (s *Store) CurrentLease(ctx context.Context, name string) (events.Lease, bool, error) {
	start := time.Now()
	l, ok, err := s.inner.CurrentLease(ctx, name)
	s.observe("current_lease", start, err)
	return l, ok, err
}

func (s *Store) SaveCheckpoint(ctx context.Context, c events.Checkpoint) error {
	start := time.Now()
	err := s.inner.SaveCheckpoint(ctx, c)
	s.observe("save_checkpoint", start, err)
	if err == nil {
		s.m.checkpoint.seen(c)
	}
	return err
}

func (s *Store) LoadCheckpoint(ctx context.Context, name string, atOrBefore int64) (events.Checkpoint, bool, error) {
	start := time.Now()
	c, ok, err := s.inner.LoadCheckpoint(ctx, name, atOrBefore)
	s.observe("load_checkpoint", start, err)
	if err == nil && ok {
		s.m.checkpoint.seen(c)
	}
	return c, ok, err
}

func (s *Store) Close() error { return s.inner.Close() }

// checkpointCollector reports the newest checkpoint this process saved or
// loaded.
type checkpointCollector struct {
	mu    sync.Mutex
	found bool
	pos   int64
	at    time.Time
	bytes int
}

var (
	descCheckpointPos   = prometheus.NewDesc("corral_checkpoint_position", "Log position of the newest checkpoint this process saved or loaded.", nil, nil)
	descCheckpointAge   = prometheus.NewDesc("corral_checkpoint_age_seconds", "Seconds since the newest checkpoint this process saved or loaded was taken; a long age means a long replay when a master starts.", nil, nil)
	descCheckpointBytes = prometheus.NewDesc("corral_checkpoint_bytes", "Size of the newest checkpoint this process saved or loaded.", nil, nil)
)

func (c *checkpointCollector) seen(cp events.Checkpoint) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.found && cp.Position < c.pos {
		return
	}
	c.found, c.pos, c.at, c.bytes = true, cp.Position, cp.TakenAt, len(cp.State)
}

func (c *checkpointCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descCheckpointPos
	ch <- descCheckpointAge
	ch <- descCheckpointBytes
}

func (c *checkpointCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.found {
		return
	}
	ch <- prometheus.MustNewConstMetric(descCheckpointPos, prometheus.GaugeValue, float64(c.pos))
	ch <- prometheus.MustNewConstMetric(descCheckpointAge, prometheus.GaugeValue, time.Since(c.at).Seconds())
	ch <- prometheus.MustNewConstMetric(descCheckpointBytes, prometheus.GaugeValue, float64(c.bytes))
}
