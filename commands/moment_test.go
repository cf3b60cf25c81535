package commands_test

import (
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/commands"
)

// A moment asked about must be in the past and after the epoch; a little
// clock skew passes, and the refusal names the field.
func TestCheckPastMoment(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	for _, ok := range []time.Time{now, now.Add(-5 * time.Minute), time.Unix(0, 0), now.Add(commands.MomentSkew)} {
		if err := commands.CheckPastMoment("at", ok, now); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []struct {
		t    time.Time
		want string
	}{
		{now.Add(commands.MomentSkew + time.Second), "in the future"},
		{now.AddDate(1, 0, 0), "in the future"},
		{time.Unix(0, 0).Add(-time.Microsecond), "before 1970"},
		{time.Date(1829, 1, 1, 0, 0, 0, 0, time.UTC), "before 1970"},
	} {
		t.Run(bad.want, func(t *testing.T) {
			err := commands.CheckPastMoment("at", bad.t, now)
			if commands.CodeOf(err) != commands.InvalidArgument || !strings.HasPrefix(err.Error(), "at: ") || !strings.Contains(err.Error(), bad.want) {
				t.Errorf("%s: %v, want InvalidArgument at: ... %s", bad.t, err, bad.want)
			}
		})
	}
}
