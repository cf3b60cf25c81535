package testkit

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// Poll returns as soon as the condition holds, and false once the time
// runs out.
func TestPoll(t *testing.T) {
	var n atomic.Int32
	if !Poll(5*time.Second, func() bool { return n.Add(1) == 3 }) {
		t.Fatal("a condition that holds on the third ask was not seen")
	}
	if n.Load() != 3 {
		t.Errorf("asked %d times, want 3", n.Load())
	}
	start := time.Now()
	if Poll(30*time.Millisecond, func() bool { return false }) {
		t.Fatal("a condition that never holds was reported held")
	}
	if time.Since(start) < 30*time.Millisecond {
		t.Error("gave up before the time ran out")
	}
}

// Consistently asks for the whole time given and fails at the first
// moment the condition does not hold.
func TestConsistently(t *testing.T) {
	var n atomic.Int32
	start := time.Now()
	Consistently(t, 50*time.Millisecond, 5*time.Millisecond, "always holds", func() (bool, string) { n.Add(1); return true, "" })
	if time.Since(start) < 50*time.Millisecond || n.Load() < 2 {
		t.Errorf("asked %d times in %s, want several over 50ms", n.Load(), time.Since(start))
	}
	ft := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Consistently(ft, 5*time.Second, time.Millisecond, "breaks", func() (bool, string) { return n.Add(1) < 100, "broke" })
	}()
	<-done
	if !ft.failed {
		t.Error("a condition that stops holding was not reported")
	}
}

// fatalRecorder records a Fatalf and ends its goroutine as testing.T does.
type fatalRecorder struct {
	testing.TB
	failed bool
}

func (f *fatalRecorder) Helper() {}

func (f *fatalRecorder) Fatalf(string, ...any) {
	f.failed = true
	runtime.Goexit()
}

func TestSyncBuffer(t *testing.T) {
	var b SyncBuffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 100 {
			b.Write([]byte("x"))
		}
	}()
	<-done
	if got := len(b.String()); got != 100 {
		t.Errorf("%d bytes, want 100", got)
	}
}
