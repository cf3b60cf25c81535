package cli

import (
	"context"
	"fmt"
	"io"
	"time"
)

// progressLine is the line a long catch-up shows: the events done of the
// total, the rate so far and, from it, the time left.
func progressLine(done, total int64, elapsed time.Duration) string {
	line := fmt.Sprintf("%s of %s events", groupDigits(done), groupDigits(total))
	if elapsed <= 0 || done <= 0 {
		return line
	}
	rate := float64(done) / elapsed.Seconds()
	line += fmt.Sprintf(", %s events/s", groupDigits(int64(rate)))
	if total > done {
		left := time.Duration(float64(total-done) / rate * float64(time.Second))
		line += fmt.Sprintf(", %s left", left.Round(time.Second))
	}
	return line
}

// groupDigits writes n with thousands separated by commas.
func groupDigits(n int64) string {
	s := fmt.Sprint(n)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	out := make([]byte, 0, len(s)+len(s)/3)
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

// showProgress writes the progress of a catch-up to w until ctx ends:
// redrawn in place twice a second on a terminal, a line every ten seconds
// otherwise. position reads how far it got; total is where it stops.
func showProgress(ctx context.Context, w io.Writer, live bool, total int64, position func() (int64, error)) {
	start := time.Now()
	every := 10 * time.Second
	if live {
		every = 500 * time.Millisecond
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			if live {
				fmt.Fprint(w, "\r\033[K")
			}
			return
		case <-t.C:
		}
		p, err := position()
		if err != nil {
			continue
		}
		line := progressLine(p, total, time.Since(start))
		if live {
			fmt.Fprint(w, "\r\033[K"+line)
		} else {
			fmt.Fprintln(w, line)
		}
	}
}
