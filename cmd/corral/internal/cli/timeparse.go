package cli

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/corralhq/corral/commands"
)

// parseTime reads a moment as people write it on a command line:
//
//	now, today, yesterday                  (today and yesterday: local midnight)
//	2025-06-01T12:00:00Z, RFC 3339         an exact time
//	2025-06-01, 2025-06-01 12:00[:05]      local time
//	5m, -5m, 5m ago, 1h30m, 2d             that long before now
//	+5m                                    that long after now
func parseTime(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	low := strings.ToLower(s)
	midnight := func(t time.Time) time.Time {
		y, m, d := t.Date()
		return time.Date(y, m, d, 0, 0, 0, 0, t.Location())
	}
	switch low {
	case "":
		return time.Time{}, fmt.Errorf("empty; give a time like 5m (ago), today or 2025-06-01T12:00:00Z")
	case "now":
		return now, nil
	case "today":
		return midnight(now), nil
	case "yesterday":
		return midnight(now).AddDate(0, 0, -1), nil
	case "tomorrow":
		return midnight(now).AddDate(0, 0, 1), nil
	}
	for _, layout := range []string{time.RFC3339Nano, time.RFC3339} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	for _, layout := range []string{"2006-01-02", "2006-01-02 15:04", "2006-01-02 15:04:05", "2006-01-02T15:04", "2006-01-02T15:04:05"} {
		if t, err := time.ParseInLocation(layout, s, now.Location()); err == nil {
			return t, nil
		}
	}
	rel := strings.TrimSpace(strings.TrimSuffix(low, "ago"))
	after := strings.HasPrefix(rel, "+")
	rel = strings.TrimLeft(rel, "+-")
	d, err := parseDuration(rel)
	if err == nil && rel != "" {
		if after {
			return now.Add(d), nil
		}
		return now.Add(-d), nil
	}
	if errors.Is(err, errTooLong) {
		return time.Time{}, err
	}
	return time.Time{}, fmt.Errorf("%q is not a time: give RFC 3339 (2025-06-01T12:00:00Z), a date (2025-06-01), now, today, or a duration ago (5m, -5m, 2h, 1d)", s)
}

var errTooLong = errors.New("too long")

// parseDuration is time.ParseDuration plus days ("2d", "1d12h").
func parseDuration(s string) (time.Duration, error) {
	if i := strings.Index(s, "d"); i > 0 {
		days, err := strconv.ParseInt(s[:i], 10, 64)
		if err != nil {
			return 0, err
		}
		rest := time.Duration(0)
		if s[i+1:] != "" {
			if rest, err = time.ParseDuration(s[i+1:]); err != nil {
				return 0, err
			}
		}
		// A duration holds about 106,000 days: past that it would wrap
		// around, and -99999999999d would name a time in 1829.
		const maxDays = int64(math.MaxInt64 / int64(24*time.Hour))
		if days < 0 || days > maxDays || rest < 0 || rest > math.MaxInt64-time.Duration(days)*24*time.Hour {
			return 0, fmt.Errorf("%s: %w (at most %d days)", s, errTooLong, maxDays)
		}
		return time.Duration(days)*24*time.Hour + rest, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, err
	}
	if d < 0 {
		d = -d
	}
	return d, nil
}

// parsePoint reads a point of the log: a position (a whole number) or a
// time (see parseTime) in the past, as commands.CheckPastMoment has it
// (the master checks again).
func parsePoint(s string, now time.Time) (position int64, t time.Time, err error) {
	if p, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64); err == nil {
		if p <= 0 {
			return 0, time.Time{}, fmt.Errorf("position %d: positions start at 1", p)
		}
		return p, time.Time{}, nil
	}
	if t, err = parseTime(s, now); err != nil {
		return 0, time.Time{}, err
	}
	// No field here: the caller's message names its flag.
	if err := commands.CheckPastMoment("", t, now); err != nil {
		return 0, time.Time{}, err
	}
	return 0, t, nil
}

// parsePointUS is parsePoint with the time as microseconds since the
// epoch, as the API takes it: one of position and us is set.
func parsePointUS(s string, now time.Time) (position, us int64, err error) {
	position, t, err := parsePoint(s, now)
	if err != nil || position > 0 {
		return position, 0, err
	}
	return 0, t.UnixMicro(), nil
}
