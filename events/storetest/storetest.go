package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/corralhq/corral/events"
)

// Clock is a settable clock for lease tests.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock reading t.
func NewClock(t time.Time) *Clock { return &Clock{now: t} }

// Now reads the clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// Backend is what the suite needs from a backend under test.
type Backend struct {
	// New creates a fresh, empty store location and returns a function that
	// opens it; calling it again after Close reopens the same log.
	New func(t testing.TB, clock func() time.Time) (open func() events.Store)
	// Corrupt overwrites the stored type and payload of the event at position
	// in the location of s, bypassing the store's checks.
	Corrupt func(t testing.TB, s events.Store, position int64, typ string, payload []byte)
}

var epoch0 = time.Date(2026, 5, 1, 19, 0, 0, 0, time.UTC)

// Run runs the whole suite.
func Run(t *testing.T, b Backend) {
	tests := []struct {
		name string
		fn   func(*testing.T, Backend)
	}{
		{"AppendAndReadRoundTrip", testRoundTrip},
		{"StreamVersions", testStreamVersions},
		{"BadInputChangesNothing", testBadInput},
		{"ExpectedPositionConflict", testConflict},
		{"ConcurrentExpectedAppendersOneWins", testConcurrentExpected},
		{"ConcurrentAppendersGapFree", testConcurrentGapFree},
		{"FencingAfterLeaseTakeover", testFencing},
		{"Idempotency", testIdempotency},
		{"AppendManyGroupCommit", testAppendMany},
		{"RecordedAtNeverGoesBack", testRecordedAtMonotonic},
		{"TailCatchUpThenFollow", testTail},
		{"ReopenAfterClose", testReopen},
		{"OneMiBPayload", testLargePayload},
		{"Read100000Events", testRead100k},
		{"CorruptPayloadIsAnError", testCorrupt},
		{"Checkpoints", testCheckpoints},
		{"ClosedStore", testClosed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, b) })
	}
}

func open(t *testing.T, b Backend) (events.Store, *Clock) {
	t.Helper()
	clk := NewClock(epoch0)
	s := b.New(t, clk.Now)()
	t.Cleanup(func() { s.Close() })
	return s, clk
}

// Machine returns a small, valid event for tests and benchmarks.
func Machine(i int) events.Event {
	name := fmt.Sprintf("m%d", i)
	e := events.New(events.MachineStream(name), epoch0.Add(time.Duration(i)*time.Millisecond), &events.MachineRegistered{
		Machine:    name,
		Address:    fmt.Sprintf("10.0.%d.%d:7071", i/256%256, i%256),
		Capacity:   &events.Resources{CpuMilli: 16000, MemoryBytes: 64 << 30, DiskBytes: 512 << 30, Ports: 1000},
		Attributes: map[string]string{"rack": fmt.Sprintf("r%d", i%50), "arch": "amd64"},
	})
	e.Actor = "admin"
	return e
}

// Task returns a valid task event on its own stream.
func Task(user, job string, index int32) events.Event {
	return events.New(events.TaskStream(user, job, index), epoch0, &events.TaskScheduled{
		User: user, Job: job, Index: index, Machine: "m1", SpecVersion: 1, Score: 0.5, MachinesExamined: 12,
	})
}

func batch(n, offset int) []events.Event {
	out := make([]events.Event, n)
	for i := range out {
		out[i] = Machine(offset + i)
	}
	return out
}

func mustAppend(t testing.TB, s events.Store, req events.AppendRequest) events.AppendResult {
	t.Helper()
	res, err := s.Append(context.Background(), req)
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	return res
}

func readAll(t testing.TB, s events.Store) []events.Event {
	t.Helper()
	var out []events.Event
	from := int64(1)
	for {
		evs, err := s.Read(context.Background(), from, 5000)
		if err != nil {
			t.Fatalf("read from %d: %v", from, err)
		}
		if len(evs) == 0 {
			return out
		}
		out = append(out, evs...)
		from = evs[len(evs)-1].Position + 1
	}
}

func head(t testing.TB, s events.Store) int64 {
	t.Helper()
	h, err := s.Head(context.Background())
	if err != nil {
		t.Fatalf("head: %v", err)
	}
	return h
}

// checkGapFree asserts positions are exactly 1..n.
func checkGapFree(t testing.TB, evs []events.Event, n int) {
	t.Helper()
	if len(evs) != n {
		t.Fatalf("read %d events, want %d", len(evs), n)
	}
	for i, e := range evs {
		if e.Position != int64(i+1) {
			t.Fatalf("events[%d].Position = %d, want %d (gap or duplicate)", i, e.Position, i+1)
		}
	}
}

func testRoundTrip(t *testing.T, b Backend) {
	s, clk := open(t, b)
	ctx := context.Background()
	if h := head(t, s); h != 0 {
		t.Fatalf("empty log head = %d, want 0", h)
	}
	e := Machine(7)
	e.Actor, e.CausationID, e.CorrelationID = "alice", "cmd-1", "corr-1"
	e.OccurredAt = time.Date(2026, 5, 2, 3, 4, 5, 123456789, time.UTC)
	res := mustAppend(t, s, events.AppendRequest{ExpectedPosition: 0, IdempotencyKey: "req-1", Events: []events.Event{e}})
	if res.First != 1 || res.Last != 1 || res.Duplicate {
		t.Fatalf("first append = %+v, want 1..1", res)
	}
	clk.Advance(time.Second)
	res = mustAppend(t, s, events.AppendRequest{ExpectedPosition: 1, Events: batch(3, 100)})
	if res.First != 2 || res.Last != 4 {
		t.Fatalf("second append = %+v, want 2..4", res)
	}
	all := readAll(t, s)
	checkGapFree(t, all, 4)
	got := all[0]
	want := e
	want.OccurredAt = e.OccurredAt.Truncate(time.Microsecond)
	switch {
	case got.Stream != want.Stream, got.StreamVersion != 1, got.Type != "MachineRegistered", got.SchemaVersion != 1:
		t.Fatalf("envelope = %+v", got)
	case got.Actor != "alice" || got.CausationID != "cmd-1" || got.CorrelationID != "corr-1" || got.IdempotencyKey != "req-1":
		t.Fatalf("ids = %q %q %q %q", got.Actor, got.CausationID, got.CorrelationID, got.IdempotencyKey)
	case !got.OccurredAt.Equal(want.OccurredAt):
		t.Fatalf("occurred_at = %v, want %v", got.OccurredAt, want.OccurredAt)
	case !got.RecordedAt.Equal(epoch0):
		t.Fatalf("recorded_at = %v, want the store clock's %v", got.RecordedAt, epoch0)
	case !all[1].RecordedAt.Equal(epoch0.Add(time.Second)):
		t.Fatalf("second recorded_at = %v", all[1].RecordedAt)
	case !proto.Equal(got.Data, want.Data):
		t.Fatalf("payload = %v, want %v", got.Data, want.Data)
	}
	if h := head(t, s); h != 4 {
		t.Fatalf("head = %d, want 4", h)
	}
	// Read honours from and limit.
	part, err := s.Read(ctx, 2, 2)
	if err != nil || len(part) != 2 || part[0].Position != 2 || part[1].Position != 3 {
		t.Fatalf("Read(2, 2) = %v, %v", positions(part), err)
	}
	if beyond, err := s.Read(ctx, 5, 10); err != nil || len(beyond) != 0 {
		t.Fatalf("Read past head = %d events, %v", len(beyond), err)
	}
}

func positions(evs []events.Event) []int64 {
	out := make([]int64, len(evs))
	for i, e := range evs {
		out[i] = e.Position
	}
	return out
}

func testStreamVersions(t *testing.T, b Backend) {
	s, _ := open(t, b)
	ctx := context.Background()
	a, c := Task("alice", "web", 0), Task("alice", "web", 1)
	mustAppend(t, s, events.AppendRequest{ExpectedPosition: events.AnyPosition, Events: []events.Event{a, c, a}})
	mustAppend(t, s, events.AppendRequest{ExpectedPosition: events.AnyPosition, Events: []events.Event{c, a}})
	got, err := s.ReadStream(ctx, a.Stream)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("stream %s has %d events, want 3", a.Stream, len(got))
	}
	for i, e := range got {
		if e.StreamVersion != int64(i+1) || e.Stream != a.Stream {
			t.Fatalf("stream event %d: version %d stream %s", i, e.StreamVersion, e.Stream)
		}
	}
	if want := []int64{1, 3, 5}; fmt.Sprint(positions(got)) != fmt.Sprint(want) {
		t.Fatalf("stream positions = %v, want %v", positions(got), want)
	}
	other, err := s.ReadStream(ctx, c.Stream)
	if err != nil || len(other) != 2 || other[1].StreamVersion != 2 {
		t.Fatalf("stream %s = %v, %v", c.Stream, positions(other), err)
	}
	none, err := s.ReadStream(ctx, "job/nobody/nothing")
	if err != nil || len(none) != 0 {
		t.Fatalf("unknown stream = %d events, %v", len(none), err)
	}
}

func testBadInput(t *testing.T, b Backend) {
	s, _ := open(t, b)
	ctx := context.Background()
	mustAppend(t, s, events.AppendRequest{Events: batch(2, 0)})
	if _, err := s.Append(ctx, events.AppendRequest{ExpectedPosition: events.AnyPosition}); !errors.Is(err, events.ErrEmptyAppend) {
		t.Fatalf("empty append: %v, want ErrEmptyAppend", err)
	}
	bad := batch(3, 10)
	bad[1].Stream = ""
	_, err := s.Append(ctx, events.AppendRequest{ExpectedPosition: events.AnyPosition, Events: bad})
	if !errors.Is(err, events.ErrInvalid) || !strings.Contains(err.Error(), "events[1].stream") {
		t.Fatalf("empty stream: %v, want ErrInvalid naming events[1].stream", err)
	}
	bad = batch(1, 10)
	bad[0].OccurredAt = time.Time{}
	if _, err := s.Append(ctx, events.AppendRequest{ExpectedPosition: events.AnyPosition, Events: bad}); !errors.Is(err, events.ErrInvalid) {
		t.Fatalf("zero occurred_at: %v, want ErrInvalid", err)
	}
	bad = batch(1, 10)
	bad[0].Data = nil
	if _, err := s.Append(ctx, events.AppendRequest{ExpectedPosition: events.AnyPosition, Events: bad}); !errors.Is(err, events.ErrInvalid) {
		t.Fatalf("nil data: %v, want ErrInvalid", err)
	}
	if _, err := s.Append(ctx, events.AppendRequest{ExpectedPosition: -7, Events: batch(1, 10)}); !errors.Is(err, events.ErrInvalid) {
		t.Fatalf("expected position -7: %v, want ErrInvalid", err)
	}
	if h := head(t, s); h != 2 {
		t.Fatalf("bad appends changed the log: head %d, want 2", h)
	}
	if _, err := s.Read(ctx, 1, 0); !errors.Is(err, events.ErrInvalid) {
		t.Fatalf("read limit 0: %v, want ErrInvalid", err)
	}
}

func testConflict(t *testing.T, b Backend) {
	s, _ := open(t, b)
	ctx := context.Background()
	mustAppend(t, s, events.AppendRequest{ExpectedPosition: 0, Events: batch(2, 0)})
	for _, stale := range []int64{0, 1, 3} {
		_, err := s.Append(ctx, events.AppendRequest{ExpectedPosition: stale, Events: batch(1, 10)})
		if !errors.Is(err, events.ErrConflict) {
			t.Fatalf("expected %d at head 2: %v, want ErrConflict", stale, err)
		}
	}
	mustAppend(t, s, events.AppendRequest{ExpectedPosition: 2, Events: batch(1, 10)})
	checkGapFree(t, readAll(t, s), 3)
}

func testConcurrentExpected(t *testing.T, b Backend) {
	s, _ := open(t, b)
	ctx := context.Background()
	const appenders, rounds = 6, 8
	for round := 0; round < rounds; round++ {
		h := head(t, s)
		var wins, conflicts atomic.Int32
		var wg sync.WaitGroup
		for a := 0; a < appenders; a++ {
			wg.Add(1)
			go func(a int) {
				defer wg.Done()
				_, err := s.Append(ctx, events.AppendRequest{ExpectedPosition: h, Events: batch(3, a*10)})
				switch {
				case err == nil:
					wins.Add(1)
				case errors.Is(err, events.ErrConflict):
					conflicts.Add(1)
				default:
					t.Errorf("appender %d: %v", a, err)
				}
			}(a)
		}
		wg.Wait()
		if wins.Load() != 1 || conflicts.Load() != appenders-1 {
			t.Fatalf("round %d: %d wins and %d conflicts, want exactly 1 win", round, wins.Load(), conflicts.Load())
		}
	}
	checkGapFree(t, readAll(t, s), rounds*3)
}

func testConcurrentGapFree(t *testing.T, b Backend) {
	s, _ := open(t, b)
	ctx := context.Background()
	const appenders, each, size = 6, 15, 4
	var wg sync.WaitGroup
	var mu sync.Mutex
	var results []events.AppendResult
	for a := 0; a < appenders; a++ {
		wg.Add(1)
		go func(a int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				res, err := s.Append(ctx, events.AppendRequest{ExpectedPosition: events.AnyPosition, Events: batch(size, a*1000+i*size)})
				if err != nil {
					t.Errorf("appender %d: %v", a, err)
					return
				}
				mu.Lock()
				results = append(results, res)
				mu.Unlock()
			}
		}(a)
	}
	wg.Wait()
	all := readAll(t, s)
	checkGapFree(t, all, appenders*each*size)
	// Each append's events are contiguous and each batch is its own.
	for _, r := range results {
		if r.Last-r.First != size-1 {
			t.Fatalf("append landed at %d..%d, not contiguous", r.First, r.Last)
		}
		first := all[r.First-1].Data.(*events.MachineRegistered).Machine
		for p := r.First; p <= r.Last; p++ {
			m := all[p-1].Data.(*events.MachineRegistered).Machine
			var base, got int
			fmt.Sscanf(first, "m%d", &base)
			fmt.Sscanf(m, "m%d", &got)
			if got != base+int(p-r.First) {
				t.Fatalf("position %d holds %s, batches interleaved", p, m)
			}
		}
	}
}

func testFencing(t *testing.T, b Backend) {
	s, clk := open(t, b)
	ctx := context.Background()
	// Before any lease, appends carry epoch 0.
	mustAppend(t, s, events.AppendRequest{ExpectedPosition: events.AnyPosition, Events: batch(1, 0)})
	mustBeFenced(t, s, 1, batch(1, 0), "epoch 1 with no lease")
	a, err := s.AcquireLease(ctx, events.LeaderLease, "master-a", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if a.Epoch != 1 || a.Holder != "master-a" {
		t.Fatalf("first lease = %+v, want epoch 1 held by master-a", a)
	}
	mustBeFenced(t, s, 0, batch(1, 0), "epoch 0 under a lease")
	mustAppend(t, s, events.AppendRequest{ExpectedPosition: events.AnyPosition, Epoch: a.Epoch, Events: batch(1, 1)})
	// Another holder cannot take a live lease.
	held, err := s.AcquireLease(ctx, events.LeaderLease, "master-b", 10*time.Second)
	if !errors.Is(err, events.ErrLeaseHeld) || held.Holder != "master-a" {
		t.Fatalf("acquire of a held lease: %+v, %v, want ErrLeaseHeld naming master-a", held, err)
	}
	// Renewal keeps the epoch.
	clk.Advance(5 * time.Second)
	if a, err = s.RenewLease(ctx, a, 10*time.Second); err != nil || a.Epoch != 1 {
		t.Fatalf("renew: %+v, %v", a, err)
	}
	// master-a stalls past its lease; master-b takes over with a new epoch.
	clk.Advance(11 * time.Second)
	bl, err := s.AcquireLease(ctx, events.LeaderLease, "master-b", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if bl.Epoch != 2 {
		t.Fatalf("takeover epoch = %d, want 2", bl.Epoch)
	}
	before := head(t, s)
	mustBeFenced(t, s, a.Epoch, batch(1, 2), "deposed leader's append")
	if head(t, s) != before {
		t.Fatal("a fenced append changed the log")
	}
	if _, err := s.RenewLease(ctx, a, 10*time.Second); !errors.Is(err, events.ErrLeaseLost) {
		t.Fatalf("deposed leader's renew: %v, want ErrLeaseLost", err)
	}
	mustAppend(t, s, events.AppendRequest{ExpectedPosition: before, Epoch: bl.Epoch, Events: batch(1, 3)})
	cur, ok, err := s.CurrentLease(ctx, events.LeaderLease)
	if err != nil || !ok || cur.Holder != "master-b" || cur.Epoch != 2 {
		t.Fatalf("current lease = %+v %v %v", cur, ok, err)
	}
	// Release hands over at once.
	if err := s.ReleaseLease(ctx, bl); err != nil {
		t.Fatal(err)
	}
	cl, err := s.AcquireLease(ctx, events.LeaderLease, "master-c", 10*time.Second)
	if err != nil || cl.Epoch != 3 {
		t.Fatalf("acquire after release: %+v, %v, want epoch 3", cl, err)
	}
	mustBeFenced(t, s, 2, batch(1, 4), "released leader's append")
	// Every acquisition is a new term, even by the holder of a live lease
	// (a holder is one process's incarnation: a replica restarted under
	// the same name is another holder, and waits for the lease to lapse).
	again, err := s.AcquireLease(ctx, events.LeaderLease, "master-c", 10*time.Second)
	if err != nil || again.Epoch != 4 {
		t.Fatalf("re-acquire by the holder: %+v, %v, want epoch 4", again, err)
	}
	mustBeFenced(t, s, cl.Epoch, batch(1, 5), "append under the earlier term")
	if _, err := s.RenewLease(ctx, cl, 10*time.Second); !errors.Is(err, events.ErrLeaseLost) {
		t.Fatalf("renew of the earlier term: %v, want ErrLeaseLost", err)
	}
	if held, err := s.AcquireLease(ctx, events.LeaderLease, "master-c#2", 10*time.Second); !errors.Is(err, events.ErrLeaseHeld) || held.Epoch != 4 {
		t.Fatalf("another incarnation's acquire of a live lease: %+v, %v, want ErrLeaseHeld at epoch 4", held, err)
	}
}

// mustBeFenced appends evs at epoch, which a store must refuse with
// ErrFenced; what says whose append it is.
func mustBeFenced(t *testing.T, s events.Store, epoch int64, evs []events.Event, what string) {
	t.Helper()
	_, err := s.Append(context.Background(), events.AppendRequest{ExpectedPosition: events.AnyPosition, Epoch: epoch, Events: evs})
	if !errors.Is(err, events.ErrFenced) {
		t.Fatalf("%s: %v, want ErrFenced", what, err)
	}
}

func testIdempotency(t *testing.T, b Backend) {
	s, _ := open(t, b)
	ctx := context.Background()
	mustAppend(t, s, events.AppendRequest{Events: batch(1, 0)})
	first := mustAppend(t, s, events.AppendRequest{ExpectedPosition: 1, IdempotencyKey: "submit-42", Events: batch(3, 10)})
	// The retry comes with a stale expectation and different content: the
	// original result is returned and nothing is appended.
	again := mustAppend(t, s, events.AppendRequest{ExpectedPosition: 1, IdempotencyKey: "submit-42", Events: batch(5, 50)})
	if again.First != first.First || again.Last != first.Last || !again.Duplicate {
		t.Fatalf("retry = %+v, want %+v marked duplicate", again, first)
	}
	if h := head(t, s); h != 4 {
		t.Fatalf("head after retry = %d, want 4", h)
	}
	// Racing retries of one request append it once.
	var wg sync.WaitGroup
	var dups atomic.Int32
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := s.Append(ctx, events.AppendRequest{ExpectedPosition: events.AnyPosition, IdempotencyKey: "kill-7", Events: batch(2, 90)})
			if err != nil {
				t.Errorf("racing retry: %v", err)
				return
			}
			if res.Duplicate {
				dups.Add(1)
			}
		}()
	}
	wg.Wait()
	if dups.Load() != 5 {
		t.Fatalf("%d of 6 racing retries were duplicates, want 5", dups.Load())
	}
	checkGapFree(t, readAll(t, s), 6)

	// With a fingerprint, the same key sent for another request is refused,
	// alone or in a batch; the same request (or one without a
	// fingerprint) is a duplicate; the store tells what it keeps.
	fp := mustAppend(t, s, events.AppendRequest{ExpectedPosition: events.AnyPosition, IdempotencyKey: "alice/r1", Fingerprint: "aaaa", Events: batch(1, 100)})
	before := head(t, s)
	if _, err := s.Append(ctx, events.AppendRequest{ExpectedPosition: events.AnyPosition, IdempotencyKey: "alice/r1", Fingerprint: "bbbb", Events: batch(1, 101)}); !errors.Is(err, events.ErrRequestReused) {
		t.Fatalf("key reused for another request: %v, want ErrRequestReused", err)
	}
	if _, err := s.AppendMany(ctx, []events.AppendRequest{{ExpectedPosition: events.AnyPosition, IdempotencyKey: "alice/r2", Events: batch(1, 102)}, {IdempotencyKey: "alice/r1", Fingerprint: "bbbb", Events: batch(1, 103)}}); err == nil {
		t.Fatal("a batch holding a reused key was appended")
	}
	if h := head(t, s); h != before {
		t.Fatalf("refused appends moved the head from %d to %d", before, h)
	}
	for _, f := range []string{"aaaa", ""} {
		again := mustAppend(t, s, events.AppendRequest{ExpectedPosition: events.AnyPosition, IdempotencyKey: "alice/r1", Fingerprint: f, Events: batch(1, 104)})
		if !again.Duplicate || again.First != fp.First {
			t.Fatalf("retry with fingerprint %q = %+v, want a duplicate of %+v", f, again, fp)
		}
	}
	if r, ok, err := s.Request(ctx, "alice/r1"); err != nil || !ok || r.First != fp.First || r.Last != fp.Last || r.Fingerprint != "aaaa" {
		t.Fatalf("Request(alice/r1) = %+v %v %v", r, ok, err)
	}
	if _, ok, err := s.Request(ctx, "bob/r1"); err != nil || ok {
		t.Fatalf("Request of an unknown key: %v %v", ok, err)
	}
	if _, err := s.Append(ctx, events.AppendRequest{ExpectedPosition: events.AnyPosition, Fingerprint: "cccc", Events: batch(1, 105)}); !errors.Is(err, events.ErrInvalid) {
		t.Fatalf("a fingerprint without a key: %v, want ErrInvalid", err)
	}
}

func testTail(t *testing.T, b Backend) {
	s, _ := open(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	mustAppend(t, s, events.AppendRequest{Events: batch(50, 0)})
	sub := s.Subscribe(0)
	var got []events.Event
	for len(got) < 50 {
		evs, err := sub.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, evs...)
	}
	// Follow live appends made concurrently by several writers.
	const live = 120
	done := make(chan error, 1)
	go func() {
		for i := 0; i < live/3; i++ {
			if _, err := s.Append(ctx, events.AppendRequest{ExpectedPosition: events.AnyPosition, Events: batch(3, 1000+i*3)}); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for len(got) < 50+live {
		evs, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("following after %d events: %v", len(got), err)
		}
		got = append(got, evs...)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	checkGapFree(t, got, 50+live)
	if sub.Position() != 50+live {
		t.Fatalf("subscription position = %d", sub.Position())
	}
	// Resume from the middle, as after a restart.
	resumed := s.Subscribe(100)
	evs, err := resumed.Next(ctx)
	if err != nil || len(evs) == 0 || evs[0].Position != 101 {
		t.Fatalf("resume after 100: first %v, %v", positions(evs), err)
	}
	// Next blocks until something is appended, and ends with its context.
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancelShort()
	if _, err := sub.Next(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next with nothing new: %v, want deadline exceeded", err)
	}
}

func testReopen(t *testing.T, b Backend) {
	clk := NewClock(epoch0)
	openFn := b.New(t, clk.Now)
	s := openFn()
	mustAppend(t, s, events.AppendRequest{Events: batch(10, 0)})
	l, err := s.AcquireLease(context.Background(), events.LeaderLease, "m", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openFn()
	defer s.Close()
	if h := head(t, s); h != 10 {
		t.Fatalf("head after reopen = %d, want 10", h)
	}
	mustAppend(t, s, events.AppendRequest{ExpectedPosition: 10, Epoch: l.Epoch, Events: batch(5, 10)})
	all := readAll(t, s)
	checkGapFree(t, all, 15)
	if got := all[10].Data.(*events.MachineRegistered).Machine; got != "m10" {
		t.Fatalf("position 11 = %s, want m10", got)
	}
	st, err := s.ReadStream(context.Background(), events.MachineStream("m3"))
	if err != nil || len(st) != 1 {
		t.Fatalf("stream after reopen: %d, %v", len(st), err)
	}
}

func testLargePayload(t *testing.T, b Backend) {
	s, _ := open(t, b)
	big := strings.Repeat("x", 1<<20)
	e := events.New(events.JobStream("alice", "big"), epoch0, &events.JobSubmitted{
		Spec:        &events.JobSpec{Name: "big", User: "alice", TaskCount: 1, Command: "/bin/true", Env: map[string]string{"BLOB": big}},
		SpecVersion: 1,
	})
	mustAppend(t, s, events.AppendRequest{Events: []events.Event{e, Machine(1)}})
	all := readAll(t, s)
	checkGapFree(t, all, 2)
	if got := all[0].Data.(*events.JobSubmitted).Spec.Env["BLOB"]; len(got) != 1<<20 || got != big {
		t.Fatalf("1 MiB payload came back as %d bytes", len(got))
	}
}

func testRead100k(t *testing.T, b Backend) {
	s, _ := open(t, b)
	const total, size = 100_000, 2_000
	for i := 0; i < total/size; i++ {
		mustAppend(t, s, events.AppendRequest{ExpectedPosition: int64(i * size), Events: batch(size, i*size)})
	}
	all := readAll(t, s)
	checkGapFree(t, all, total)
	if got := all[total-1].Data.(*events.MachineRegistered).Machine; got != fmt.Sprintf("m%d", total-1) {
		t.Fatalf("last event = %s", got)
	}
}

func testCorrupt(t *testing.T, b Backend) {
	s, _ := open(t, b)
	ctx := context.Background()
	mustAppend(t, s, events.AppendRequest{Events: batch(3, 0)})
	b.Corrupt(t, s, 2, "MachineRegistered", []byte{0xff, 0xff, 0xff})
	_, err := s.Read(ctx, 1, 10)
	if !errors.Is(err, events.ErrCorrupt) || !strings.Contains(err.Error(), "position 2") || !strings.Contains(err.Error(), "MachineRegistered") {
		t.Fatalf("read over a corrupt payload: %v, want ErrCorrupt naming position 2 and its type", err)
	}
	b.Corrupt(t, s, 3, "NoSuchEvent", []byte{})
	_, err = s.Read(ctx, 3, 10)
	if !errors.Is(err, events.ErrCorrupt) || !strings.Contains(err.Error(), "position 3") || !strings.Contains(err.Error(), "NoSuchEvent") {
		t.Fatalf("read of an unknown type: %v, want ErrCorrupt naming position 3 and the type", err)
	}
	// The event before the damage still reads.
	if evs, err := s.Read(ctx, 1, 1); err != nil || len(evs) != 1 {
		t.Fatalf("read before the damage: %v", err)
	}
}

func testCheckpoints(t *testing.T, b Backend) {
	s, _ := open(t, b)
	ctx := context.Background()
	if _, ok, err := s.LoadCheckpoint(ctx, "cell", 100); err != nil || ok {
		t.Fatalf("no checkpoint yet: ok=%v err=%v", ok, err)
	}
	for _, p := range []int64{10, 20} {
		c := events.Checkpoint{Name: "cell", Position: p, TakenAt: epoch0.Add(time.Duration(p) * time.Second), State: []byte(fmt.Sprintf("state@%d", p))}
		if err := s.SaveCheckpoint(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SaveCheckpoint(ctx, events.Checkpoint{Name: "other", Position: 15, TakenAt: epoch0, State: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		at   int64
		want int64
	}{{5, 0}, {10, 10}, {15, 10}, {25, 20}} {
		c, ok, err := s.LoadCheckpoint(ctx, "cell", tc.at)
		if err != nil {
			t.Fatal(err)
		}
		if tc.want == 0 {
			if ok {
				t.Fatalf("checkpoint at or before %d = %d, want none", tc.at, c.Position)
			}
			continue
		}
		if !ok || c.Position != tc.want || string(c.State) != fmt.Sprintf("state@%d", tc.want) || !c.TakenAt.Equal(epoch0.Add(time.Duration(tc.want)*time.Second)) {
			t.Fatalf("checkpoint at or before %d = %+v %v, want %d", tc.at, c, ok, tc.want)
		}
	}
}

func testClosed(t *testing.T, b Backend) {
	clk := NewClock(epoch0)
	s := b.New(t, clk.Now)()
	mustAppend(t, s, events.AppendRequest{Events: batch(1, 0)})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(context.Background(), events.AppendRequest{ExpectedPosition: events.AnyPosition, Events: batch(1, 1)}); !errors.Is(err, events.ErrClosed) {
		t.Fatalf("append after close: %v, want ErrClosed", err)
	}
	if _, err := s.Read(context.Background(), 1, 1); !errors.Is(err, events.ErrClosed) {
		t.Fatalf("read after close: %v, want ErrClosed", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
}

func testAppendMany(t *testing.T, b Backend) {
	s, _ := open(t, b)
	ctx := context.Background()
	mustAppend(t, s, events.AppendRequest{Events: batch(1, 0)})
	res, err := s.AppendMany(ctx, []events.AppendRequest{
		{ExpectedPosition: 1, IdempotencyKey: "k1", Events: batch(2, 10)},
		{ExpectedPosition: events.AnyPosition, IdempotencyKey: "k2", Events: batch(3, 20)},
		{ExpectedPosition: events.AnyPosition, Events: batch(1, 30)},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []events.AppendResult{{First: 2, Last: 3}, {First: 4, Last: 6}, {First: 7, Last: 7}}
	if fmt.Sprint(res) != fmt.Sprint(want) {
		t.Fatalf("results = %v, want %v", res, want)
	}
	all := readAll(t, s)
	checkGapFree(t, all, 7)
	if all[1].IdempotencyKey != "k1" || all[4].IdempotencyKey != "k2" || all[6].IdempotencyKey != "" {
		t.Fatalf("keys = %q %q %q", all[1].IdempotencyKey, all[4].IdempotencyKey, all[6].IdempotencyKey)
	}
	// A batch holding a request seen before appends nothing at all.
	_, err = s.AppendMany(ctx, []events.AppendRequest{
		{ExpectedPosition: 7, IdempotencyKey: "k3", Events: batch(1, 40)},
		{ExpectedPosition: events.AnyPosition, IdempotencyKey: "k2", Events: batch(1, 50)},
	})
	if !errors.Is(err, events.ErrDuplicateInBatch) {
		t.Fatalf("batch with a seen key: %v, want ErrDuplicateInBatch", err)
	}
	if h := head(t, s); h != 7 {
		t.Fatalf("refused batch changed the head to %d", h)
	}
	// ... and did not record its new key: k3 appends afterwards.
	if r := mustAppend(t, s, events.AppendRequest{ExpectedPosition: 7, IdempotencyKey: "k3", Events: batch(1, 40)}); r.Duplicate || r.First != 8 {
		t.Fatalf("k3 after the refused batch = %+v", r)
	}
	// One request alone keeps Append's duplicate answer.
	one, err := s.AppendMany(ctx, []events.AppendRequest{{ExpectedPosition: events.AnyPosition, IdempotencyKey: "k2", Events: batch(1, 60)}})
	if err != nil || len(one) != 1 || !one[0].Duplicate || one[0].First != 4 || one[0].Last != 6 {
		t.Fatalf("single seen key = %v, %v", one, err)
	}
	for _, tc := range []struct {
		reqs []events.AppendRequest
		want error
	}{
		{[]events.AppendRequest{{ExpectedPosition: 3, Events: batch(1, 0)}, {ExpectedPosition: events.AnyPosition, Events: batch(1, 0)}}, events.ErrConflict},
		{[]events.AppendRequest{{ExpectedPosition: 8, Events: batch(1, 0)}, {ExpectedPosition: 9, Events: batch(1, 0)}}, events.ErrInvalid},
		{[]events.AppendRequest{{ExpectedPosition: 8, Events: batch(1, 0)}, {ExpectedPosition: events.AnyPosition, Epoch: 3, Events: batch(1, 0)}}, events.ErrInvalid},
		{[]events.AppendRequest{{ExpectedPosition: 8, IdempotencyKey: "x", Events: batch(1, 0)}, {ExpectedPosition: events.AnyPosition, IdempotencyKey: "x", Events: batch(1, 0)}}, events.ErrDuplicateInBatch},
		{[]events.AppendRequest{{ExpectedPosition: 8, Events: batch(1, 0)}, {ExpectedPosition: events.AnyPosition}}, events.ErrEmptyAppend},
		{nil, events.ErrEmptyAppend},
	} {
		if _, err := s.AppendMany(ctx, tc.reqs); !errors.Is(err, tc.want) {
			t.Fatalf("AppendMany: %v, want %v", err, tc.want)
		}
	}
	if h := head(t, s); h != 8 {
		t.Fatalf("refused batches changed the head to %d", h)
	}
}

func testRecordedAtMonotonic(t *testing.T, b Backend) {
	s, clk := open(t, b)
	mustAppend(t, s, events.AppendRequest{Events: batch(1, 0)})
	// The writer's clock steps back an hour (another master's clock, or
	// this one corrected): recorded_at holds, so it never goes back along
	// the log and time lookups stay sound.
	clk.Advance(-time.Hour)
	mustAppend(t, s, events.AppendRequest{ExpectedPosition: 1, Events: batch(2, 1)})
	clk.Advance(2 * time.Hour)
	mustAppend(t, s, events.AppendRequest{ExpectedPosition: 3, Events: batch(1, 3)})
	all := readAll(t, s)
	checkGapFree(t, all, 4)
	for i := 1; i < len(all); i++ {
		if all[i].RecordedAt.Before(all[i-1].RecordedAt) {
			t.Fatalf("recorded_at goes back from %v (position %d) to %v (position %d)", all[i-1].RecordedAt, i, all[i].RecordedAt, i+1)
		}
	}
	if !all[1].RecordedAt.Equal(epoch0) || !all[3].RecordedAt.Equal(epoch0.Add(time.Hour)) {
		t.Fatalf("recorded_at = %v, %v, want the last one held, then the clock", all[1].RecordedAt, all[3].RecordedAt)
	}
}
