package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/testkit"
)

// run runs the corral command with env as its whole environment.
func runEnv(ctx context.Context, env map[string]string, args ...string) (int, string, string) {
	var out, errb testkit.SyncBuffer
	code := Main(ctx, args, Env{Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return env[k] }})
	return code, out.String(), errb.String()
}

// A master run with --certs serves TLS: people get in with a certificate
// or a token the certs and token verbs issued, and not with neither, nor
// with a revoked token; without --certs or --insecure it does not start.
func TestMasterWithCertsAndTokens(t *testing.T) {
	dir := t.TempDir()
	certs := filepath.Join(dir, "cell")
	empty := t.TempDir()
	env := map[string]string{"CORRAL_USER": "alice", "CORRAL_DATA": empty, "CORRAL_CERTS": certs}
	bg := context.Background()
	must := mustRun(t, env)
	must("certs", "init", "--cell", "prod")
	must("certs", "issue", "--role", "master", "m1")
	must("certs", "issue", "--role", "user", "alice")
	tok := must("token", "issue", "bob")
	if !strings.HasPrefix(tok, "corral_") {
		t.Fatalf("token issue printed %q", tok)
	}
	if code, _, stderr := runEnv(bg, env, "master", "--store", filepath.Join(dir, "x.db"), "--listen", testkit.FreeAddr(t)); code != ExitUsage || !strings.Contains(stderr, "--insecure") {
		t.Fatalf("master without --certs or --insecure: exit %d %s", code, stderr)
	}

	addr := testkit.FreeAddr(t)
	logs := runCertMaster(t, certs, filepath.Join(dir, "events.db"), addr)
	env["CORRAL_MASTER"] = addr
	ca := filepath.Join(certs, "ca.crt")
	testkit.Eventually(t, 15*time.Second, "job list with alice's certificate", func() (bool, string) {
		code, out, stderr := runEnv(bg, env, "job", "list", "--ca", ca, "--cert", filepath.Join(certs, "users", "alice.crt"), "--key", filepath.Join(certs, "users", "alice.key"))
		return code == ExitOK, fmt.Sprintf("exit %d\n%s%s\nmaster:\n%s", code, out, stderr, logs.String())
	})
	// With no credentials at all the client speaks plaintext to a TLS
	// master, and says why and how to give them.
	code, _, stderr := runEnv(bg, map[string]string{"CORRAL_USER": "alice", "CORRAL_MASTER": addr, "CORRAL_DATA": empty}, "--rpc-timeout", "3s", "job", "list")
	if code == ExitOK || !strings.Contains(stderr, "no CA or credentials were found") || !strings.Contains(stderr, "export CORRAL_DATA") {
		t.Fatalf("job list with no credentials: exit %d\n%s", code, stderr)
	}
	env["CORRAL_CA"], env["CORRAL_TOKEN"] = ca, tok
	if code, out, stderr := runEnv(bg, env, "job", "list"); code != ExitOK {
		t.Fatalf("job list with bob's token: exit %d\n%s%s", code, out, stderr)
	}
	checkSecretsFromTheEnvironment(t, env, dir, must)
	must("token", "revoke", "bob")
	// The master reads the tokens file again within a second.
	testkit.Eventually(t, 5*time.Second, "the revoked token refused", func() (bool, string) {
		code, _, stderr := runEnv(bg, env, "job", "list")
		return code != ExitOK && strings.Contains(stderr, "credentials"), fmt.Sprintf("exit %d %s", code, stderr)
	})
	delete(env, "CORRAL_TOKEN")
	delete(env, "CORRAL_CA")
	if code, _, stderr := runEnv(bg, env, "job", "list"); code == ExitOK {
		t.Fatalf("job list in plaintext against a TLS master: exit %d %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(certs, "tokens")); err != nil {
		t.Fatal(err)
	}
}

// checkSecretsFromTheEnvironment submits a job with a secret as bob, whose
// token env holds: the secret's value comes from the caller's environment,
// never the file, and no reply shows it.
func checkSecretsFromTheEnvironment(t *testing.T, env map[string]string, dir string, must func(args ...string) string) {
	t.Helper()
	bg := context.Background()
	job := filepath.Join(dir, "db.jsonnet")
	if err := os.WriteFile(job, []byte(`{name: 'db', priority: 'best-effort', count: 1, command: '/bin/true', resources: {cpu: '10m', memory: '8MiB'}, secret_env: ['DB_PASSWORD']}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runEnv(bg, env, "job", "submit", job, "--secret", "DB_PASSWORD"); code != ExitUsage || !strings.Contains(stderr, "not set") {
		t.Fatalf("--secret without the variable: exit %d %s", code, stderr)
	}
	if code, _, stderr := runEnv(bg, env, "job", "submit", job, "--secret", "OTHER"); code != ExitUsage {
		t.Fatalf("--secret OTHER: exit %d %s", code, stderr)
	}
	env["DB_PASSWORD"], env["OTHER"] = "hunter2", "x"
	if code, _, stderr := runEnv(bg, env, "job", "submit", job, "--secret", "OTHER"); code != ExitUsage || !strings.Contains(stderr, "secret_env") {
		t.Fatalf("--secret OTHER, not in secret_env: exit %d %s", code, stderr)
	}
	// The job is bob's, whose token this is, whatever $CORRAL_USER says,
	// and the submission says so.
	if out := must("job", "submit", job, "--secret", "DB_PASSWORD"); !strings.Contains(out, "job bob/db submitted") || !strings.Contains(out, "submitted bob/db (1 task)") {
		t.Errorf("submit with bob's token as CORRAL_USER=alice printed:\n%s", out)
	}
	got := must("job", "get", "db", "-o", "json")
	if strings.Contains(got, "hunter2") || !strings.Contains(got, "<redacted>") {
		t.Errorf("job get shows the secret, or no <redacted>:\n%s", got)
	}
}

func TestParseUIDRange(t *testing.T) {
	r, err := parseUIDRange("200000:1000")
	if err != nil || r.First != 200000 || r.Count != 1000 {
		t.Fatalf("200000:1000: %+v %v", r, err)
	}
	for _, bad := range []string{"", "200000", "0:10", "10:0", "x:1", "4294967295:2"} {
		if _, err := parseUIDRange(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// A cell's id is minted once per data directory and kept; a directory
// with an agent's state from before ids were minted keeps its old id; a
// spoilt id file is refused, naming the file.
func TestCellID(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	idA, err := cellID(a, false, "legacy")
	if err != nil {
		t.Fatal(err)
	}
	if again, err := cellID(a, false, "legacy"); err != nil || again != idA {
		t.Errorf("second read: %q, %v; want %q", again, err, idA)
	}
	idB, err := cellID(b, false, "legacy")
	if err != nil || idB == idA || idA == "legacy" || len(idA) != 16 {
		t.Errorf("ids %q and %q (%v): want two random ones, each its own", idA, idB, err)
	}
	old := t.TempDir()
	if id, err := cellID(old, true, "0123456789abcdef"); err != nil || id != "0123456789abcdef" {
		t.Errorf("directory with state: %q, %v; want the id it had", id, err)
	}
	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, CellIDFile), []byte("../x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := cellID(bad, false, ""); err == nil || !strings.Contains(err.Error(), filepath.Join(bad, CellIDFile)) {
		t.Errorf("spoilt id file: %v; want an error naming it", err)
	}
}

// A master with --certs serves /metrics (whose series name users and jobs)
// to an admin's bearer token only: 401 without one or with one it does not
// know, 403 for a user's, 200 for an admin's, as Prometheus scrapes it.
func TestMetricsNeedAnAdminToken(t *testing.T) {
	dir := t.TempDir()
	certs := filepath.Join(dir, "cell")
	env := map[string]string{"CORRAL_USER": "alice", "CORRAL_DATA": t.TempDir(), "CORRAL_CERTS": certs}
	must := mustRun(t, env)
	must("certs", "init", "--cell", "prod")
	must("certs", "issue", "--role", "master", "m1")
	userTok := must("token", "issue", "bob")
	adminTok := must("token", "issue", "--role", "admin", "prom")

	addr, httpAddr := testkit.FreeAddr(t), testkit.FreeAddr(t)
	logs := runCertMaster(t, certs, filepath.Join(dir, "events.db"), addr, "--http", httpAddr)
	get := func(auth string) (int, string) {
		t.Helper()
		req, err := http.NewRequest("GET", "http://"+httpAddr+"/metrics", nil)
		if err != nil {
			t.Fatal(err)
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	var body string
	testkit.Eventually(t, 15*time.Second, "/metrics with an admin's token", func() (bool, string) {
		var code int
		code, body = get("Bearer " + adminTok)
		return code == http.StatusOK, fmt.Sprintf("%d %s\nmaster:\n%s", code, body, logs.String())
	})
	if !strings.Contains(body, "corral_master_leader") {
		t.Errorf("/metrics with an admin's token: no corral_master_leader:\n%.2000s", body)
	}
	for _, c := range []struct {
		auth, want string
		code       int
	}{
		{"", "Bearer", http.StatusUnauthorized},
		{"Basic YWxpY2U6eA==", "Bearer", http.StatusUnauthorized},
		{"Bearer corral_not-a-token", "not known", http.StatusUnauthorized},
		{"Bearer " + userTok, "admin", http.StatusForbidden},
	} {
		t.Run(c.want, func(t *testing.T) {
			code, body := get(c.auth)
			if code != c.code || !strings.Contains(body, c.want) || strings.Contains(body, "corral_") && strings.Contains(body, "# TYPE") {
				t.Errorf("/metrics with %q: %d %.300q, want %d saying %q and no series", c.auth, code, body, c.code, c.want)
			}
		})
	}
}
