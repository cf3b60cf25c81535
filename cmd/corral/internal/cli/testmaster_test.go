package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	return runMaster(t, append([]string{"master", "--certs", certs, "--name", "m1", "--store", store, "--listen", addr}, extra...))
}

// startTestMaster runs `corral master` on a SQLite log in dir until the
// test ends, and returns its address and its log.
func startTestMaster(t *testing.T, dir string, extra ...string) (string, *testkit.SyncBuffer) {
	t.Helper()
	addr := testkit.FreeAddr(t)
	logs := runMaster(t, append([]string{"master", "--insecure", "--name", "m1", "--store", filepath.Join(dir, "events.db"), "--listen", addr}, extra...))
	return addr, logs
}

// runMaster runs the corral command argv, a master, with an empty
// environment until the test ends, and returns its log.
func runMaster(t *testing.T, argv []string) *testkit.SyncBuffer {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	logs := &testkit.SyncBuffer{}
	go func() {
		done <- Main(ctx, argv, Env{Stdout: io.Discard, Stderr: logs, Getenv: func(string) string { return "" }})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return logs
}

// submitBundle writes jobs (Jsonnet objects) as a bundle named name in dir
// and submits it with env once the master takes submissions; it returns
// the bundle's path.
func submitBundle(t *testing.T, env map[string]string, logs *testkit.SyncBuffer, dir, name string, jobs []string) string {
	t.Helper()
	bundle := filepath.Join(dir, name)
	if err := os.WriteFile(bundle, []byte("{jobs: ["+strings.Join(jobs, ",")+"]}"), 0o644); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 15*time.Second, "the bundle submitted", func() (bool, string) {
		code, out, stderr := runEnv(context.Background(), env, "job", "submit", bundle)
		return code == ExitOK, fmt.Sprintf("exit %d\n%s%s\n%s", code, out, stderr, logs.String())
	})
	return bundle
}
