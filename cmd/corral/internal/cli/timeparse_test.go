package cli

import (
	"strings"
	"testing"
	"time"
)

func TestParseTime(t *testing.T) {
	now := time.Date(2025, 6, 1, 15, 30, 0, 0, time.UTC)
	cases := []struct {
		in   string
		want time.Time
	}{
		{"now", now},
		{"today", time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)},
		{"yesterday", time.Date(2025, 5, 31, 0, 0, 0, 0, time.UTC)},
		{"5m", now.Add(-5 * time.Minute)},
		{"-5m", now.Add(-5 * time.Minute)},
		{"5m ago", now.Add(-5 * time.Minute)},
		{"+1h", now.Add(time.Hour)},
		{"2d", now.Add(-48 * time.Hour)},
		{"1d12h", now.Add(-36 * time.Hour)},
		{"2025-05-01T10:00:00Z", time.Date(2025, 5, 1, 10, 0, 0, 0, time.UTC)},
		{"2025-05-01", time.Date(2025, 5, 1, 0, 0, 0, 0, time.UTC)},
		{"2025-05-01 10:20", time.Date(2025, 5, 1, 10, 20, 0, 0, time.UTC)},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			got, err := parseTime(c.in, now)
			if err != nil || !got.Equal(c.want) {
				t.Errorf("parseTime(%q) = %v, %v; want %v", c.in, got, err, c.want)
			}
		})
	}
	for _, bad := range []string{"", "5", "soon", "2025-13-01"} {
		if _, err := parseTime(bad, now); err == nil {
			t.Errorf("parseTime(%q): no error", bad)
		}
	}
	if p, _, err := parsePoint("1200", now); err != nil || p != 1200 {
		t.Errorf("parsePoint(1200) = %d, %v", p, err)
	}
	if p, tm, err := parsePoint("5m", now); err != nil || p != 0 || !tm.Equal(now.Add(-5*time.Minute)) {
		t.Errorf("parsePoint(5m) = %d %v %v", p, tm, err)
	}
	if _, _, err := parsePoint("0", now); err == nil {
		t.Error("parsePoint(0): no error")
	}
	// An "ago" too long for a duration is refused, not wrapped around into
	// 1829; one before the epoch or in the future is not a point of the log.
	for in, want := range map[string]string{
		"-99999999999d": "too long", "99999999999d ago": "too long", "106752d": "too long", "106751d1000h": "too long",
		"100000d": "before 1970", "1969-12-31": "before 1970",
		"+1h": "in the future", "tomorrow": "in the future", "2999-01-01T00:00:00Z": "in the future",
	} {
		if _, tm, err := parsePoint(in, now); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parsePoint(%q) = %v, %v; want an error saying %q", in, tm, err, want)
		}
	}
	if tm, err := parseTime("106751d", now); err != nil || tm.Year() > 1750 {
		t.Errorf("parseTime(106751d) = %v, %v; want a time about 292 years ago", tm, err)
	}
}
