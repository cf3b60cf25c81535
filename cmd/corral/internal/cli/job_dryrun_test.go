package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// job submit --dry-run shows the submission planned on a copy of the cell
// and submits nothing; it is refused where the submission would be (a live
// job of the name). job plan of a job that does not live plans its
// submission without --at. job get --spec round-trips through job plan.
func TestJobSubmitDryRunAndPlanOfANewJob(t *testing.T) {
	env, _, must := startCertMaster(t)
	job := filepath.Join(t.TempDir(), "db.jsonnet")
	if err := os.WriteFile(job, []byte(`{name: 'db', priority: 'best-effort', count: 2, command: '/bin/true', resources: {cpu: '10m', memory: '8MiB'}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	bg := context.Background()
	for _, verb := range [][]string{{"job", "submit", job, "--dry-run"}, {"job", "plan", job}} {
		code, out, stderr := runEnv(bg, env, verb...)
		if code != ExitOK || !strings.Contains(out, "job bob/db: a new job") || !strings.Contains(out, "bob/db submitted") || !strings.Contains(out, "leaves waiting") {
			t.Fatalf("corral %s: exit %d\n%s%s", strings.Join(verb, " "), code, out, stderr)
		}
		if verb[1] == "submit" && !strings.Contains(stderr, "nothing was submitted") {
			t.Errorf("submit --dry-run does not say nothing was submitted:\n%s", stderr)
		}
	}
	if _, _, stderr := runEnv(bg, env, "job", "list"); !strings.Contains(stderr, "no jobs of bob") {
		t.Fatalf("after the dry run and the plan, job list:\n%s", stderr)
	}
	must("job", "submit", job)

	// job get --spec prints a job file that reads back to the same spec,
	// durations, quantities and policies included: planned, it changes
	// nothing.
	full := filepath.Join(t.TempDir(), "full.jsonnet")
	if err := os.WriteFile(full, []byte(`{name: 'full', priority: 1, count: 2, command: '/bin/sh', args: ['-c', 'sleep 1'],
  labels: {team: 'db'}, env: {MODE: 'x'}, port_names: ['http'], resources: {cpu: '250m', memory: '96MiB', disk: '1GiB'},
  constraints: [{attribute: 'arch', value: 'amd64'}], health_check: {path: '/', period: '3s'},
  restart: {mode: 'on-failure', backoff: '2s', max_backoff: '1m', max_restarts: 3},
  update: {max_disruptions: 2, min_healthy_time: '5s'}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	must("job", "submit", full)
	for _, format := range []string{"json", "yaml"} {
		out := must("job", "get", "full", "--spec", "-o", format)
		if strings.Contains(out, "task_count") || strings.Contains(out, "backoff_initial_ms") || strings.Contains(out, `"user"`) {
			t.Errorf("job get --spec -o %s uses the API's field names:\n%s", format, out)
		}
		again := filepath.Join(t.TempDir(), "full."+format)
		if err := os.WriteFile(again, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		if plan := must("job", "plan", again); !strings.Contains(plan, "job bob/full: no change") {
			t.Errorf("job get --spec -o %s, planned back: not \"no change\":\n%s\nthe file:\n%s", format, plan, out)
		}
	}
	code, out, stderr := runEnv(bg, env, "job", "submit", job, "--dry-run")
	if code == ExitOK || !strings.Contains(stderr, "bob/db exists") {
		t.Errorf("submit --dry-run of a live job: exit %d\n%s%s", code, out, stderr)
	}
	if code, _, stderr := runEnv(bg, env, "job", "submit", job, "--dry-run", "--wait"); code != ExitUsage || !strings.Contains(stderr, "--dry-run") {
		t.Errorf("submit --dry-run --wait: exit %d\n%s", code, stderr)
	}
}
