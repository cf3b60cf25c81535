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
	return PollEvery(within, pollEvery, cond)
}

// PollEvery is Poll asking every interval: a condition that costs a
// process or a query to ask is asked less often than pollEvery.
func PollEvery(within, every time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(every)
	}
}

// Eventually waits until cond holds, failing the test with what was
// waited for, and what cond last said of it, when within passes first.
func Eventually(t testing.TB, within time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	EventuallyEvery(t, within, pollEvery, what, cond)
}

// EventuallyEvery is Eventually asking every interval.
func EventuallyEvery(t testing.TB, within, every time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	var last string
	held := PollEvery(within, every, func() bool {
		ok, msg := cond()
		last = msg
		return ok
	})
	if !held {
		t.Fatalf("%s: not within %s; last: %s", what, within, last)
	}
}

// Consistently asks cond every interval for the whole of during, failing
// the test as soon as it does not hold: for a test whose subject is that
// nothing goes wrong for a while (no machine marked down past a grace).
func Consistently(t testing.TB, during, every time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	var last string
	broke := PollEvery(during, every, func() bool {
		ok, msg := cond()
		last = msg
		return !ok
	})
	if broke {
		t.Fatalf("%s: not so throughout %s; %s", what, during, last)
	}
}
