package testkit

import (
	"testing"
	"time"
)

// pollEvery is how often a condition is asked again: often enough that a
// test waits little past the moment it holds, seldom enough not to load a
// shared machine.
const pollEvery = 10 * time.Millisecond

// Poll asks cond until it holds or within has passed, and reports whether
// it held.
func Poll(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pollEvery)
	}
}

// Eventually waits until cond holds, failing the test with what was
// waited for, and what cond last said of it, when within passes first.
func Eventually(t testing.TB, within time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	var last string
	held := Poll(within, func() bool {
		ok, msg := cond()
		last = msg
		return ok
	})
	if !held {
		t.Fatalf("%s: not within %s; last: %s", what, within, last)
	}
}
