package feed_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/events/feed"
	"github.com/corralhq/corral/events/sqlitestore"
	"github.com/corralhq/corral/events/storetest"
	"github.com/corralhq/corral/internal/testkit"
)

// counter is a consumer whose position survives feed restarts (as the
// Infrastore's does in its file). It counts how often each position was
// applied and can be told to panic or fail at a position.
type counter struct {
	mu       sync.Mutex
	position int64
	applied  map[int64]int
	panicAt  int64 // panic once when applying this position
	failAt   int64 // fail every time at this position
}

func (c *counter) Name() string { return "counter" }

func (c *counter) Position(context.Context) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.position, nil
}

func (c *counter) Apply(_ context.Context, evs []events.Event) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range evs {
		if e.Position == c.failAt {
			return errors.New("cannot apply this one")
		}
		if e.Position == c.panicAt {
			c.panicAt = 0
			panic("handler killed mid-stream")
		}
	}
	// All or nothing, like a transaction.
	for _, e := range evs {
		c.applied[e.Position]++
		c.position = e.Position
	}
	return nil
}

func (c *counter) check(t *testing.T, upTo int64) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for p := int64(1); p <= upTo; p++ {
		if n := c.applied[p]; n != 1 {
			t.Fatalf("position %d applied %d times, want exactly once", p, n)
		}
	}
	if int64(len(c.applied)) != upTo {
		t.Fatalf("%d positions applied, want %d", len(c.applied), upTo)
	}
}

func openStore(t *testing.T) events.Store {
	s, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "e.db"), sqlitestore.Options{PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func appendN(t *testing.T, s events.Store, batches, size int) {
	for b := 0; b < batches; b++ {
		evs := make([]events.Event, size)
		for i := range evs {
			evs[i] = storetest.Machine(b*size + i)
		}
		if _, err := s.Append(context.Background(), events.AppendRequest{ExpectedPosition: events.AnyPosition, Events: evs}); err != nil {
			t.Error(err)
			return
		}
	}
}

func runFeed(t *testing.T, s events.Store, c *counter) (stop func()) {
	f, err := feed.New(s, feed.Options{InitialInterval: 5 * time.Millisecond, Retries: 3}, c)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("feed: %v", err)
		}
	}
}

func waitPosition(t *testing.T, c *counter, want int64) {
	t.Helper()
	testkit.Eventually(t, 20*time.Second, fmt.Sprintf("the consumer reaches %d", want), func() (bool, string) {
		p, _ := c.Position(context.Background())
		return p >= want, fmt.Sprintf("consumer at %d", p)
	})
}

func TestHandlerKilledMidStreamLosesAndDoublesNothing(t *testing.T) {
	s := openStore(t)
	c := &counter{applied: map[int64]int{}, panicAt: 150}
	stop := runFeed(t, s, c)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); appendN(t, s, 20, 10) }() // 200 events while the feed runs
	waitPosition(t, c, 120)
	// Stop the whole feed in the middle of the stream, then start a new one:
	// it resumes from the consumer's position.
	stop()
	wg.Wait()
	stop = runFeed(t, s, c)
	appendN(t, s, 10, 10) // 100 more
	waitPosition(t, c, 300)
	stop()
	c.check(t, 300)
}

func TestPoisonedBatchHaltsItsConsumer(t *testing.T) {
	s := openStore(t)
	appendN(t, s, 10, 10)
	c := &counter{applied: map[int64]int{}, failAt: 55}
	f, err := feed.New(s, feed.Options{InitialInterval: time.Millisecond, Retries: 2}, c)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	testkit.Eventually(t, 10*time.Second, "the feed poisons the batch holding 55", func() (bool, string) {
		return len(f.Poisoned()) > 0, "nothing poisoned"
	})
	appendN(t, s, 1, 10)
	// A halted consumer stays halted while events arrive: watched for a
	// while.
	if testkit.Poll(100*time.Millisecond, func() bool { p, _ := c.Position(context.Background()); return p >= 55 }) {
		t.Error("the consumer went on past the poisoned event")
	}
	cancel()
	<-done
	ps := f.Poisoned()
	if len(ps) == 0 || ps[0].Consumer != "counter" || ps[0].From > 55 || ps[0].To < 55 || ps[0].Reason == "" {
		t.Fatalf("poisoned = %+v, want the batch holding 55", ps)
	}
	if p, _ := c.Position(context.Background()); p >= 55 {
		t.Fatalf("consumer went past the poisoned event to %d", p)
	}
	// Fixed and restarted, it goes on from where it halted: nothing skipped.
	c.mu.Lock()
	c.failAt = 0
	c.mu.Unlock()
	stop := runFeed(t, s, c)
	waitPosition(t, c, 110)
	stop()
	c.check(t, 110)
}
