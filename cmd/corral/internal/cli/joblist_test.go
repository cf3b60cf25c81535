package cli

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// `job list` pages through every job rather than stop silently at the
// master's page size, and says how many --limit left out.
func TestJobListPagesThroughEveryJob(t *testing.T) {
	defer func(n int) { jobListPage = n }(jobListPage)
	jobListPage = 3
	dir := t.TempDir()
	addr, logs := startTestMaster(t, dir)
	var jobs []string
	for i := range 7 {
		jobs = append(jobs, fmt.Sprintf("{name: 'j%d', priority: 'best-effort', count: 1, command: '/bin/true', resources: {cpu: '10m', memory: '8MiB'}}", i))
	}
	env := map[string]string{"CORRAL_USER": "alice", "CORRAL_MASTER": addr, "CORRAL_DATA": t.TempDir()}
	submitBundle(t, env, logs, dir, "many.jsonnet", jobs)
	code, out, stderr := runEnv(context.Background(), env, "-o", "csv", "job", "list")
	if code != ExitOK || strings.Count(out, "alice/j") != 7 || strings.Contains(stderr, "shown") {
		t.Fatalf("job list: exit %d, want all 7 jobs\n%s%s", code, out, stderr)
	}
	code, out, stderr = runEnv(context.Background(), env, "-o", "csv", "job", "list", "--limit", "5")
	if code != ExitOK || strings.Count(out, "alice/j") != 5 || !strings.Contains(stderr, "5 of 7 jobs shown; --limit 0 shows every one") {
		t.Fatalf("job list --limit 5: exit %d\n%s%s", code, out, stderr)
	}
	if code, _, stderr = runEnv(context.Background(), env, "job", "list", "--limit", "-1"); code != ExitUsage || !strings.Contains(stderr, "--limit -1") {
		t.Fatalf("job list --limit -1: exit %d %s", code, stderr)
	}
}
