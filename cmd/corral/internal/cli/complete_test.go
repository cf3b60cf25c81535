package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/testkit"
)

// Shell completion asks the master: job names for the job verbs, a job's
// task indexes for the task verbs, and the values of --output.
func TestCompletion(t *testing.T) {
	dir := t.TempDir()
	addr, logs := startTestMaster(t, dir, "--cell", "prod")
	var jobs []string
	for _, name := range []string{"web", "worker", "db"} {
		jobs = append(jobs, fmt.Sprintf("{name: '%s', priority: 'best-effort', count: 3, command: '/bin/true', resources: {cpu: '10m', memory: '8MiB'}}", name))
	}
	env := map[string]string{"CORRAL_USER": "alice", "CORRAL_MASTER": addr, "CORRAL_DATA": t.TempDir()}
	bundle := submitBundle(t, env, logs, dir, "jobs.jsonnet", jobs)
	// Another user's job is not offered.
	if code, out, stderr := runEnv(context.Background(), map[string]string{"CORRAL_USER": "bob", "CORRAL_MASTER": addr, "CORRAL_DATA": t.TempDir()}, "job", "submit", bundle); code != ExitOK {
		t.Fatalf("bob's submit: exit %d\n%s%s", code, out, stderr)
	}
	// DNS names are in the cell's zone, as its master says, not a default.
	if code, out, stderr := runEnv(context.Background(), env, "task", "get", "web", "0"); code != ExitOK || !strings.Contains(out, "0.web.alice.prod.corral") {
		t.Errorf("task get: exit %d, want names in the prod zone\n%s%s", code, out, stderr)
	}
	if code, out, stderr := runEnv(context.Background(), env, "job", "get", "web"); code != ExitOK || !strings.Contains(out, "web.alice.prod.corral") {
		t.Errorf("job get: exit %d\n%s%s", code, out, stderr)
	}
	runEnv(context.Background(), env, "job", "kill", "db")
	complete := func(args ...string) []string {
		t.Helper()
		code, out, stderr := runEnv(context.Background(), env, append([]string{"__complete"}, args...)...)
		if code != ExitOK {
			t.Fatalf("__complete %v: exit %d\n%s%s", args, code, out, stderr)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if last := lines[len(lines)-1]; last != ":4" { // ShellCompDirectiveNoFileComp
			t.Fatalf("__complete %v: directive %q, want no file completion\n%s", args, last, out)
		}
		return lines[:len(lines)-1]
	}
	if got := complete("job", "get", ""); !slices.Equal(got, []string{"web", "worker"}) {
		t.Errorf("job get: %v, want alice's live jobs web and worker", got)
	}
	if got := complete("job", "kill", "web", "w"); !slices.Equal(got, []string{"web", "worker"}) {
		t.Errorf("job kill web w: %v", got)
	}
	if got := complete("job", "rollback", "wo"); !slices.Equal(got, []string{"worker"}) {
		t.Errorf("job rollback wo: %v", got)
	}
	if got := complete("task", "get", "web", ""); !slices.Equal(got, []string{"0", "1", "2"}) {
		t.Errorf("task get web: %v, want its task indexes", got)
	}
	if got := complete("task", "logs", "worker", "1"); !slices.Equal(got, []string{"1"}) {
		t.Errorf("task logs worker 1: %v", got)
	}
	if got := complete("job", "list", "-o", ""); !slices.Equal(got, outputFormats) {
		t.Errorf("-o: %v", got)
	}
	// The shells' scripts: source <(corral completion bash).
	for _, sh := range []string{"bash", "zsh", "fish"} {
		if code, out, stderr := runEnv(context.Background(), env, "completion", sh); code != ExitOK || !strings.Contains(out, "__complete") {
			t.Errorf("completion %s: exit %d\n%.200s%s", sh, code, out, stderr)
		}
	}
	// A cell that is down completes nothing, quickly.
	down := map[string]string{"CORRAL_USER": "alice", "CORRAL_MASTER": testkit.FreeAddr(t), "CORRAL_DATA": t.TempDir()}
	start := time.Now()
	code, out, _ := runEnv(context.Background(), down, "__complete", "job", "get", "")
	if code != ExitOK || strings.TrimSpace(out) != ":4" || time.Since(start) > 4*time.Second {
		t.Errorf("with the master down: exit %d in %s: %q", code, time.Since(start), out)
	}
}
