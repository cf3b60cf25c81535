package cli

import (
	"context"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// corral sim's --from and --to keep the rule of every moment of the log:
// the past only, refused naming the flag before the log is read.
func TestSimPointsAreInThePast(t *testing.T) {
	cmd := &cobra.Command{}
	cmd.SetContext(context.Background())
	for _, v := range []string{"2999-01-01T00:00:00Z", "1969-12-31T23:00:00Z"} {
		if _, err := logPoint(cmd, nil, "to", v, 0); err == nil || !strings.Contains(err.Error(), "--to") {
			t.Errorf("--to %s: %v, want an error naming --to", v, err)
		}
	}
	if n, err := logPoint(cmd, nil, "from", "12", 0); err != nil || n != 12 {
		t.Errorf("--from 12: %d, %v", n, err)
	}
}
