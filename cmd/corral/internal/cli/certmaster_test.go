package cli

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/testkit"
)

// mustRun is a runner of the corral command with env as its environment
// that fails the test on a non-zero exit and returns stdout, trimmed.
func mustRun(t *testing.T, env map[string]string) func(args ...string) string {
	return func(args ...string) string {
		t.Helper()
		code, out, stderr := runEnv(context.Background(), env, args...)
		if code != ExitOK {
			t.Fatalf("corral %s: exit %d\n%s%s", strings.Join(args, " "), code, out, stderr)
		}
		return strings.TrimSpace(out)
	}
}

// runCertMaster runs master m1 of the cell directory certs (--certs) on
// the log store, listening on addr, with extra flags, until the test ends,
// and returns its log.
func runCertMaster(t *testing.T, certs, store, addr string, extra ...string) *testkit.SyncBuffer {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	logs := &testkit.SyncBuffer{}
	argv := append([]string{"master", "--certs", certs, "--name", "m1", "--store", store, "--listen", addr}, extra...)
	go func() {
		done <- Main(ctx, argv, Env{Stdout: io.Discard, Stderr: logs, Getenv: func(string) string { return "" }})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return logs
}
