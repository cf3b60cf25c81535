package master_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/commands/master"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/events/sqlitestore"
	"github.com/corralhq/corral/internal/testkit"
	"github.com/corralhq/corral/projections"
)

// faultyStore is a store whose faults a test switches: every call failing
// (the database unreachable), appends that commit but whose answer is lost,
// appends held until released. These are the write path's failures the
// simulation (internal/cellsim) found mishandled.
type faultyStore struct {
	events.Store
	down       atomic.Bool
	loseAnswer atomic.Int32 // the next n appends commit, then report an error
	hold       chan struct{}
	holding    atomic.Bool
	held       atomic.Int32 // appends waiting on hold
}

var errUnreachable = errors.New("faulty store: connection refused")

func newFaultyStore(t *testing.T) *faultyStore {
	s, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "events.db"), sqlitestore.Options{PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &faultyStore{Store: s}
}

func (s *faultyStore) AppendMany(ctx context.Context, reqs []events.AppendRequest) ([]events.AppendResult, error) {
	if s.holding.Load() {
		s.held.Add(1)
		<-s.hold
		s.held.Add(-1)
	}
	if s.down.Load() {
		return nil, errUnreachable
	}
	res, err := s.Store.AppendMany(ctx, reqs)
	if err == nil && s.loseAnswer.Add(-1) >= 0 {
		return nil, errors.New("faulty store: connection reset after commit")
	}
	return res, err
}

func (s *faultyStore) Append(ctx context.Context, req events.AppendRequest) (events.AppendResult, error) {
	if s.down.Load() {
		return events.AppendResult{}, errUnreachable
	}
	return s.Store.Append(ctx, req)
}

func (s *faultyStore) Read(ctx context.Context, from int64, limit int) ([]events.Event, error) {
	if s.down.Load() {
		return nil, errUnreachable
	}
	return s.Store.Read(ctx, from, limit)
}

func (s *faultyStore) Head(ctx context.Context) (int64, error) {
	if s.down.Load() {
		return 0, errUnreachable
	}
	return s.Store.Head(ctx)
}

func (s *faultyStore) LoadCheckpoint(ctx context.Context, name string, at int64) (events.Checkpoint, bool, error) {
	if s.down.Load() {
		return events.Checkpoint{}, false, errUnreachable
	}
	return s.Store.LoadCheckpoint(ctx, name, at)
}

func (s *faultyStore) Subscribe(after int64) *events.Subscription {
	return events.NewSubscription(s, nil, after, 1000, 20*time.Millisecond)
}

// submitCmd submits a best-effort job: no quota needed.
func submitCmd(id, name string) commands.SubmitJob {
	spec := webSpec(name, 2)
	spec.Priority = 0
	return commands.SubmitJob{Meta: commands.Meta{Actor: commands.Actor{User: "alice"}, RequestID: id}, Spec: spec}
}

func jobVisible(r *replica, name string) bool {
	seen := false
	r.M.View(func(s *projections.State) { seen = s.Job("alice", name) != nil })
	return seen
}

// An append that committed but whose answer was lost: the retry, with the
// same request id, gets the first result. Before, it was decided again
// against a state holding it and refused ("job exists").
func TestRetryOfAnAppendWhoseAnswerWasLost(t *testing.T) {
	store := newFaultyStore(t)
	r := startReplica(t, "m1", store)
	waitLeading(t, r)
	store.loseAnswer.Store(1)
	if _, err := r.M.Do(context.Background(), submitCmd("req-1", "web")); err == nil {
		t.Fatal("the append's answer was lost, yet the submission was acknowledged")
	}
	res, err := r.M.Do(context.Background(), submitCmd("req-1", "web"))
	if err != nil {
		t.Fatalf("retry of a request the log holds: %v; want its first result", err)
	}
	evs, err := store.Read(context.Background(), res.First, int(res.Last-res.First+1))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Duplicate || len(evs) == 0 || evs[0].IdempotencyKey != "alice/req-1" || evs[len(evs)-1].IdempotencyKey != "alice/req-1" {
		t.Fatalf("retry answered %+v; the log there: %d events, first key %q", res, len(evs), evs[0].IdempotencyKey)
	}
}

// A client whose attempt timed out while the writer was busy retries at the
// same master: both attempts wait in one queue and land in one batch. The
// retry waits for the first attempt's outcome; before, it was decided
// against the batch's speculative state and refused.
func TestRetryQueuedBehindItsFirstAttempt(t *testing.T) {
	store := newFaultyStore(t)
	r := startReplica(t, "m1", store)
	waitLeading(t, r)
	store.hold = make(chan struct{})
	store.holding.Store(true)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); r.M.Do(context.Background(), submitCmd("other", "db")) }()
	testkit.Eventually(t, 5*time.Second, "an append held in the store", func() (bool, string) { return store.held.Load() == 1, "" })
	first, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := r.M.Do(first, submitCmd("req-1", "web")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("first attempt: %v, want a timeout while the writer is held", err)
	}
	type answer struct {
		res master.Result
		err error
	}
	retry := make(chan answer, 1)
	go func() {
		res, err := r.M.Do(context.Background(), submitCmd("req-1", "web"))
		retry <- answer{res, err}
	}()
	testkit.Eventually(t, 5*time.Second, "the retry queued behind its first attempt", func() (bool, string) {
		n := r.M.QueuedWrites()
		return n >= 2, fmt.Sprint(n, " queued")
	})
	store.holding.Store(false)
	close(store.hold)
	wg.Wait()
	a := <-retry
	if a.err != nil {
		t.Fatalf("retry queued behind its first attempt: %v; want the first attempt's result", a.err)
	}
	if !a.res.Duplicate || a.res.First == 0 {
		t.Fatalf("retry answered %+v, want the first attempt's positions marked duplicate", a.res)
	}
}

// The store unreachable when an append fails: the batch's speculative
// events must not be what readers see, nor what the tail builds on once
// the store is back. Before, the failed reload left them in the state.
func TestFailedAppendWithStoreDownIsNeverRead(t *testing.T) {
	store := newFaultyStore(t)
	r := startReplica(t, "m1", store)
	waitLeading(t, r)
	do(t, r, submitCmd("seen", "web"))
	store.down.Store(true)
	if _, err := r.M.Do(context.Background(), submitCmd("ghost", "ghost")); err == nil {
		t.Fatal("an append to an unreachable store was acknowledged")
	}
	visible := make(chan bool, 1)
	go func() { visible <- jobVisible(r, "ghost") }()
	// The sleep is the subject: the store stays down a while, and a reader
	// meanwhile must not see the failed append.
	time.Sleep(300 * time.Millisecond)
	store.down.Store(false)
	if <-visible {
		t.Fatal("a reader saw the job of an append that failed")
	}
	head, err := store.Head(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if pos := r.M.Position(); pos > head {
		t.Fatalf("the master's state is at %d, beyond the log's head %d", pos, head)
	}
	// Appended after the outage, a job the tail must not skip.
	res := do(t, r, submitCmd("after", "db"))
	if err := r.M.WaitFor(context.Background(), res.Last); err != nil {
		t.Fatal(err)
	}
	want, err := projections.Load(context.Background(), store)
	if err != nil {
		t.Fatal(err)
	}
	var got []byte
	r.M.View(func(s *projections.State) {
		if s.Position == want.Position {
			got = projections.Encode(s)
		}
	})
	if string(got) != string(projections.Encode(want)) {
		t.Fatal("after the outage the master's state differs from the log's")
	}
}
