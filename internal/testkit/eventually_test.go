package testkit

import (
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
