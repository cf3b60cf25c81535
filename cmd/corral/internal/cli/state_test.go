package cli

import (
	"context"
	"strings"
	"testing"
)

// `corral state --at` with a moment out of range is a usage error naming
// --at, before any master is asked.
func TestStateAtOutOfRange(t *testing.T) {
	env := map[string]string{"CORRAL_USER": "alice", "CORRAL_MASTER": "127.0.0.1:1", "CORRAL_DATA": t.TempDir()}
	for _, at := range []string{"-99999999999d", "+1h", "2999-01-01"} {
		code, out, stderr := runEnv(context.Background(), env, "state", "--at", at)
		if code != ExitUsage || !strings.Contains(stderr, "--at") || out != "" {
			t.Errorf("state --at %s: exit %d, stdout %q, stderr %q; want a usage error naming --at", at, code, out, stderr)
		}
	}
}
