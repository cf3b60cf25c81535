package main_test

import (
	"encoding/csv"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/commands/auth"
	"github.com/corralhq/corral/internal/testkit"
)

// TestCostsAreTheirOwners: on a real `corral up` run by the admin root,
// alice and bob (users, with tokens) each run a job. Bob's bill, FOCUS
// export and costs page hold his costs and never name alice; asking for
// hers is refused naming the rule, and so is SQL over the cell's history.
// The admin's bill holds both, and with --user bob only bob's.
func TestCostsAreTheirOwners(t *testing.T) {
	bin := buildCorral(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	grpcAddr, httpAddr, dnsAddr := freeTCP(t), freeTCP(t), freeUDPAndTCP(t)
	admin := append(os.Environ(), "CORRAL_USER=root", "CORRAL_MASTER="+grpcAddr, "CORRAL_CELL=dev", "CORRAL_DATA="+data)
	startUp(t, bin, root, admin, []string{"up", "--data", data, "--listen", grpcAddr, "--http", httpAddr, "--dns", dnsAddr,
		"--port-base", strconv.Itoa(freeTaskPorts(t, 3))})
	corral := func(env []string, args ...string) (string, int) { return runCorral(t, bin, root, env, args...) }

	tokens := auth.NewTokens(filepath.Join(data, "certs", auth.TokensFile))
	envOf, tokenFile := map[string][]string{}, map[string]string{}
	for _, u := range []string{"alice", "bob"} {
		tok, err := tokens.Issue(u, auth.RoleUser)
		if err != nil {
			t.Fatal(err)
		}
		envOf[u] = append(slices.Clone(admin), "CORRAL_TOKEN="+tok)
		tokenFile[u] = filepath.Join(t.TempDir(), u+".token")
		if err := os.WriteFile(tokenFile[u], []byte(tok), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// The master reads the tokens file again within a second of a change.
	testkit.Eventually(t, 10*time.Second, "the new tokens accepted", func() (bool, string) {
		for _, u := range []string{"alice", "bob"} {
			if out, code := corral(envOf[u], "whoami"); code != 0 {
				return false, u + ": " + out
			}
		}
		return true, ""
	})
	job := filepath.Join(t.TempDir(), "work.jsonnet")
	if err := os.WriteFile(job, []byte(`{name: 'work', priority: 'best-effort', count: 1, command: '/bin/sh',
  args: ['-c', 'while true; do :; done'], resources: {cpu: '50m', memory: '16MiB'}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"alice", "bob"} {
		if out, code := corral(envOf[u], "job", "submit", job, "--wait"); code != 0 {
			t.Fatalf("%s submitting work: exit %d\n%s", u, code, out)
		}
	}
	// groups is the bill's group column below its header: the users billed.
	groups := func(out string) []string {
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
	bill := []string{"bill", "--from", "1h", "--to", "now", "--format", "csv"}
	// The usage windows of both reach the Infrastore within some windows.
	eventually(t, "the admin's bill holds alice and bob", 90*time.Second, func() (string, bool) {
		out, code := corral(admin, bill...)
		return out, code == 0 && slices.Equal(groups(out), []string{"alice", "bob"})
	})

	// Bob's own bill, by user or by job: his alone.
	for _, by := range []string{"user", "job"} {
		out, code := corral(envOf["bob"], append(bill, "--group-by", by)...)
		if code != 0 || strings.Contains(out, "alice") || !strings.Contains(out, "bob") {
			t.Errorf("bob's bill by %s: exit %d, want his own usage only:\n%s", by, code, out)
		}
	}
	// Naming alice is refused, and says why.
	if out, code := corral(envOf["bob"], append(bill, "--user", "alice")...); code == 0 || !strings.Contains(out, "only their own costs") {
		t.Errorf("bob's bill of alice: exit %d, want a refusal naming the rule:\n%s", code, out)
	}
	// His FOCUS export: his rows, no idle capacity, nothing of alice's.
	now := time.Now().UTC()
	focusArgs := []string{"bill", "--format", "focus", "--from", now.Add(-time.Hour).Truncate(time.Hour).Format(time.RFC3339),
		"--to", now.Add(time.Hour).Truncate(time.Hour).Format(time.RFC3339)}
	out, code := corral(envOf["bob"], focusArgs...)
	if code != 0 || strings.Contains(out, "alice") || !strings.Contains(out, "bob/work") || strings.Contains(out, "Idle capacity") {
		t.Errorf("bob's FOCUS export: exit %d, want his rows only:\n%.2000s", code, out)
	}
	if out, code := corral(envOf["bob"], append(focusArgs, "--idle", "share")...); code == 0 || !strings.Contains(out, "idle") {
		t.Errorf("bob's FOCUS export with --idle share: exit %d, want a refusal naming idle:\n%s", code, out)
	}
	// The admin's export holds both and the idle capacity.
	if out, code := corral(admin, focusArgs...); code != 0 || !strings.Contains(out, "alice/work") || !strings.Contains(out, "bob/work") || !strings.Contains(out, "Idle capacity") {
		t.Errorf("the admin's FOCUS export: exit %d, want alice's, bob's and the idle rows:\n%.2000s", code, out)
	}
	// SQL reads every user's usage: refused to bob, answered to the admin.
	sql := "SELECT DISTINCT user FROM task_usage ORDER BY user"
	if out, code := corral(envOf["bob"], "sql", sql); code == 0 || !strings.Contains(out, "admin capability") || strings.Contains(out, "alice") {
		t.Errorf("bob's SQL: exit %d, want a refusal naming the admin capability:\n%s", code, out)
	}
	if out, code := corral(admin, "sql", sql); code != 0 || !strings.Contains(out, "alice") || !strings.Contains(out, "bob") {
		t.Errorf("the admin's SQL: exit %d, want both users:\n%s", code, out)
	}
	// The admin may ask for one user's bill.
	if out, code := corral(admin, append(bill, "--user", "bob")...); code != 0 || !slices.Equal(groups(out), []string{"bob"}) {
		t.Errorf("the admin's bill of bob: exit %d, groups %v, want bob's only:\n%s", code, groups(out), out)
	}

	// The web UI's costs page asks the same rule for its viewer.
	get := func(user, path string) (string, int) {
		web := webLogin(t, httpAddr, tokenFile[user])
		resp, err := web.Get("http://" + httpAddr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b), resp.StatusCode
	}
	page, status := get("bob", "/costs")
	if status != 200 || strings.Contains(page, "alice") || !strings.Contains(page, "bob/work") || strings.Contains(page, `id="users-h"`) {
		t.Errorf("bob's costs page: %d, want his jobs only and no chart by user:\n%.3000s", status, page)
	}
	page, status = get("alice", "/costs")
	if status != 200 || strings.Contains(page, "bob") || !strings.Contains(page, "alice/work") {
		t.Errorf("alice's costs page: %d, want her jobs only:\n%.3000s", status, page)
	}
}
