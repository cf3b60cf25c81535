package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

func TestProgressLine(t *testing.T) {
	for _, c := range []struct {
		done, total int64
		elapsed     time.Duration
		want        string
	}{
		{0, 10_000_000, 0, "0 of 10,000,000 events"},
		{2_000_000, 10_000_000, 10 * time.Second, "2,000,000 of 10,000,000 events, 200,000 events/s, 40s left"},
		{10_000_000, 10_000_000, 50 * time.Second, "10,000,000 of 10,000,000 events, 200,000 events/s"},
		{999, 1000, time.Second, "999 of 1,000 events, 999 events/s, 0s left"},
	} {
		t.Run(c.want, func(t *testing.T) {
			if got := progressLine(c.done, c.total, c.elapsed); got != c.want {
				t.Errorf("progressLine(%d, %d, %s) = %q, want %q", c.done, c.total, c.elapsed, got, c.want)
			}
		})
	}
	for n, want := range map[int64]string{0: "0", 12: "12", 123: "123", 1234: "1,234", 1234567: "1,234,567", -1234: "-1,234"} {
		if got := groupDigits(n); got != want {
			t.Errorf("groupDigits(%d) = %q, want %q", n, got, want)
		}
	}
}

// A terminal gets the line redrawn in place and cleared at the end. The
// ticker runs on synctest's clock: two ticks pass without waiting for them.
func TestShowProgressRedrawsOnATerminal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out bytes.Buffer
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			var p int64
			showProgress(ctx, &out, true, 100, func() (int64, error) { p += 10; return p, nil })
		}()
		// Inside the synctest bubble this waits for nothing: it moves the
		// bubble's fake clock past two of the ticker's 500 ms ticks, the
		// test's subject.
		time.Sleep(1200 * time.Millisecond)
		synctest.Wait()
		cancel()
		<-done
		s := out.String()
		if !strings.Contains(s, "\r\033[K10 of 100 events") || !strings.Contains(s, "\r\033[K20 of 100 events") || !strings.HasSuffix(s, "\r\033[K") {
			t.Fatalf("progress on a terminal: %q", s)
		}
	})
}
