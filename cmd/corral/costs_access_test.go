package main_test

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestCostsAreTheirOwners: on a real `corral up` run by the admin root,
// alice and bob (users, with tokens) each run a job. Bob's bill, FOCUS
// export and costs page hold his costs and never name alice; asking for
// hers is refused naming the rule, and so is SQL over the cell's history.
// The admin's bill holds both, and with --user bob only bob's.
func TestCostsAreTheirOwners(t *testing.T) {
	c := startCell(t, cellOptions{user: "root"})
	tokens, tokenFile := c.issueUserTokens(t, "alice", "bob")
	admin := c.cli(t)
	as := map[string]func(...string) (string, int){}
	for _, u := range []string{"alice", "bob"} {
		as[u] = c.cliAs(t, "CORRAL_TOKEN="+tokens[u])
	}
	job := filepath.Join(t.TempDir(), "work.jsonnet")
	if err := os.WriteFile(job, []byte(`{name: 'work', priority: 'best-effort', count: 1, command: '/bin/sh',
  args: ['-c', 'while true; do :; done'], resources: {cpu: '50m', memory: '16MiB'}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"alice", "bob"} {
		if out, code := as[u]("job", "submit", job, "--wait"); code != 0 {
			t.Fatalf("%s submitting work: exit %d\n%s", u, code, out)
		}
	}
	// The usage windows of both reach the Infrastore within some windows.
	eventually(t, "the admin's bill holds alice and bob", 90*time.Second, func() (string, bool) {
		out, code := admin(lastHourBill...)
		return out, code == 0 && slices.Equal(billedGroups(out), []string{"alice", "bob"})
	})
	billsAreTheirOwners(t, admin, as["bob"])
	focusExportsAreTheirOwners(t, admin, as["bob"])

	// The web UI's costs page asks the same rule for its viewer.
	page, status := webGet(t, c.webLogin(t, tokenFile["bob"]), c.httpAddr, "/costs")
	if status != 200 || strings.Contains(page, "alice") || !strings.Contains(page, "bob/work") || strings.Contains(page, `id="users-h"`) {
		t.Errorf("bob's costs page: %d, want his jobs only and no chart by user:\n%.3000s", status, page)
	}
	page, status = webGet(t, c.webLogin(t, tokenFile["alice"]), c.httpAddr, "/costs")
	if status != 200 || strings.Contains(page, "bob") || !strings.Contains(page, "alice/work") {
		t.Errorf("alice's costs page: %d, want her jobs only:\n%.3000s", status, page)
	}
}

// lastHourBill is `corral bill` of the last hour as CSV.
var lastHourBill = []string{"bill", "--from", "1h", "--to", "now", "--format", "csv"}

// billedGroups is the bill's group column below its header: the users
// billed.
func billedGroups(out string) []string {
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil || len(recs) == 0 {
		return nil
	}
	col := slices.Index(recs[0], "group")
	var g []string
	for _, r := range recs[1:] {
		if col >= 0 && col < len(r) && r[col] != "" && !slices.Contains(g, r[col]) {
			g = append(g, r[col])
		}
	}
	slices.Sort(g)
	return g
}

// billsAreTheirOwners: bob's own bill, by user or by job, is his alone;
// naming alice is refused, and says why, and so is SQL over every user's
// usage, which the admin is answered; the admin may ask for one user's
// bill.
func billsAreTheirOwners(t *testing.T, admin, bob func(...string) (string, int)) {
	t.Helper()
	for _, by := range []string{"user", "job"} {
		out, code := bob(append(lastHourBill, "--group-by", by)...)
		if code != 0 || strings.Contains(out, "alice") || !strings.Contains(out, "bob") {
			t.Errorf("bob's bill by %s: exit %d, want his own usage only:\n%s", by, code, out)
		}
	}
	if out, code := bob(append(lastHourBill, "--user", "alice")...); code == 0 || !strings.Contains(out, "only their own costs") {
		t.Errorf("bob's bill of alice: exit %d, want a refusal naming the rule:\n%s", code, out)
	}
	sql := "SELECT DISTINCT user FROM task_usage ORDER BY user"
	if out, code := bob("sql", sql); code == 0 || !strings.Contains(out, "admin capability") || strings.Contains(out, "alice") {
		t.Errorf("bob's SQL: exit %d, want a refusal naming the admin capability:\n%s", code, out)
	}
	if out, code := admin("sql", sql); code != 0 || !strings.Contains(out, "alice") || !strings.Contains(out, "bob") {
		t.Errorf("the admin's SQL: exit %d, want both users:\n%s", code, out)
	}
	if out, code := admin(append(lastHourBill, "--user", "bob")...); code != 0 || !slices.Equal(billedGroups(out), []string{"bob"}) {
		t.Errorf("the admin's bill of bob: exit %d, groups %v, want bob's only:\n%s", code, billedGroups(out), out)
	}
}

// focusExportsAreTheirOwners: bob's FOCUS export holds his rows, no idle
// capacity, nothing of alice's, and sharing the idle capacity is refused
// him; the admin's holds both and the idle capacity.
func focusExportsAreTheirOwners(t *testing.T, admin, bob func(...string) (string, int)) {
	t.Helper()
	now := time.Now().UTC()
	focusArgs := []string{"bill", "--format", "focus", "--from", now.Add(-time.Hour).Truncate(time.Hour).Format(time.RFC3339),
		"--to", now.Add(time.Hour).Truncate(time.Hour).Format(time.RFC3339)}
	out, code := bob(focusArgs...)
	if code != 0 || strings.Contains(out, "alice") || !strings.Contains(out, "bob/work") || strings.Contains(out, "Idle capacity") {
		t.Errorf("bob's FOCUS export: exit %d, want his rows only:\n%.2000s", code, out)
	}
	if out, code := bob(append(focusArgs, "--idle", "share")...); code == 0 || !strings.Contains(out, "idle") {
		t.Errorf("bob's FOCUS export with --idle share: exit %d, want a refusal naming idle:\n%s", code, out)
	}
	if out, code := admin(focusArgs...); code != 0 || !strings.Contains(out, "alice/work") || !strings.Contains(out, "bob/work") || !strings.Contains(out, "Idle capacity") {
		t.Errorf("the admin's FOCUS export: exit %d, want alice's, bob's and the idle rows:\n%.2000s", code, out)
	}
}
