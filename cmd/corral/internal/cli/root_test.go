package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// The client's retry policy is tested with the client (commands/client);
// the command's choices of it are in newClient.

// run runs the corral command as alice, with a master that is not there.
func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	env := Env{Stdout: &out, Stderr: &errb, Getenv: func(k string) string {
		switch k {
		case "CORRAL_USER":
			return "alice"
		case "CORRAL_MASTER":
			return "127.0.0.1:1"
		}
		return ""
	}}
	code := Main(context.Background(), args, env)
	return code, out.String(), errb.String()
}

func TestExitCodes(t *testing.T) {
	for _, args := range [][]string{
		{"job", "get"},
		{"job", "frobnicate"},
		{"--no-such-flag"},
		{"-o", "xml", "job", "list"},
		{"state"},
		{"state", "--at", "soon"},
		{"state", "diff"},
		{"state", "diff", "--from", "soon"},
		{"state", "diff", "--from", "1", "--to", "0"},
		{"state", "diff", "--from", "1", "--limit", "0"},
		{"state", "diff", "--from", "1", "extra"},
		{"job", "kill"},
		{"task", "get", "hello", "x"},
	} {
		code, _, stderr := run(t, args...)
		if code != ExitUsage {
			t.Errorf("corral %s: exit %d, want %d (%s)", strings.Join(args, " "), code, ExitUsage, stderr)
		}
		if !strings.HasPrefix(stderr, "corral: ") {
			t.Errorf("corral %s: stderr %q", strings.Join(args, " "), stderr)
		}
	}
	// A share that is no number is refused as one out of range.
	for _, share := range []string{"NaN", "-1", "0", "1.5"} {
		if code, _, stderr := run(t, "sim", "--google-trace", t.TempDir(), "--share", share); code != ExitUsage || !strings.Contains(stderr, "--share") {
			t.Errorf("sim --share %s: exit %d, %q", share, code, stderr)
		}
	}
	// No master: a failure that says what to do.
	code, _, stderr := run(t, "job", "list")
	if code != ExitFailed || !strings.Contains(stderr, "corral up") || !strings.Contains(stderr, "CORRAL_MASTER") {
		t.Errorf("job list with no master: exit %d, %q", code, stderr)
	}
}
