package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/testkit"
)

// Who a command acts as is one answer, the credentials': with bob's token
// and CORRAL_USER=alice, job list, task list and quota get show bob's,
// which is whom job submit and job kill act as, and whoami says so; with
// alice's certificate and CORRAL_USER=carol, alice's.
func TestCredentialsDecideWhoTheCommandActsAs(t *testing.T) {
	env, certs, must := startCertMaster(t)
	dir := t.TempDir()
	if out := must("whoami"); out != "bob (user, by token)" {
		t.Fatalf("whoami with bob's token as CORRAL_USER=alice: %q", out)
	}
	if out := must("whoami", "-o", "json"); !strings.Contains(out, `"user": "bob"`) || !strings.Contains(out, `"via": "token"`) {
		t.Errorf("whoami -o json:\n%s", out)
	}

	job := filepath.Join(dir, "db.jsonnet")
	if err := os.WriteFile(job, []byte(`{name: 'db', priority: 'best-effort', count: 1, command: '/bin/true', resources: {cpu: '10m', memory: '8MiB'}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := must("job", "submit", job); !strings.Contains(out, "job bob/db submitted") {
		t.Fatalf("submit with bob's token printed:\n%s", out)
	}
	if out := must("job", "list"); !strings.Contains(out, "bob/db") {
		t.Errorf("job list with bob's token as CORRAL_USER=alice does not list bob/db:\n%s", out)
	}
	if out := must("task", "list"); !strings.Contains(out, "bob/db") {
		t.Errorf("task list with bob's token as CORRAL_USER=alice does not list bob/db's task:\n%s", out)
	}
	if _, out, stderr := runEnv(context.Background(), env, "quota", "get"); !strings.Contains(out+stderr, "bob") || strings.Contains(out+stderr, "alice") {
		t.Errorf("quota get with bob's token as CORRAL_USER=alice is not bob's:\n%s%s", out, stderr)
	}
	must("job", "kill", "db")
	// The file is read as bob too: std.extVar('user') is bob.
	named := filepath.Join(dir, "named.jsonnet")
	if err := os.WriteFile(named, []byte(`{name: 'db-' + std.extVar('user'), priority: 'best-effort', count: 1, command: '/bin/true', resources: {cpu: '10m', memory: '8MiB'}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := must("job", "submit", named); !strings.Contains(out, "job bob/db-bob submitted") {
		t.Errorf("a file naming std.extVar('user'), submitted with bob's token as CORRAL_USER=alice:\n%s", out)
	}

	// A certificate: its name, whatever CORRAL_USER and --user say.
	delete(env, "CORRAL_TOKEN")
	env["CORRAL_USER"], env["CORRAL_CERT"], env["CORRAL_KEY"] = "carol", filepath.Join(certs, "users", "alice.crt"), filepath.Join(certs, "users", "alice.key")
	if out := must("whoami", "--user", "dave"); out != "alice (user, by certificate)" {
		t.Errorf("whoami with alice's certificate as carol, --user dave: %q", out)
	}
	if _, _, stderr := runEnv(context.Background(), env, "job", "list"); !strings.Contains(stderr, "no jobs of alice") {
		t.Errorf("job list with alice's certificate as CORRAL_USER=carol is not alice's:\n%s", stderr)
	}
}

// startCertMaster starts a master of a cell with certificates (a cell
// "prod" with alice's certificate and bob's token) and returns the
// environment of a command that reaches it with bob's token as
// CORRAL_USER=alice, the cell directory, and a runner failing the test on
// a non-zero exit.
func startCertMaster(t *testing.T) (map[string]string, string, func(args ...string) string) {
	t.Helper()
	dir := t.TempDir()
	certs := filepath.Join(dir, "cell")
	env := map[string]string{"CORRAL_USER": "alice", "CORRAL_DATA": t.TempDir(), "CORRAL_CERTS": certs}
	bg := context.Background()
	must := mustRun(t, env)
	must("certs", "init", "--cell", "prod")
	must("certs", "issue", "--role", "master", "m1")
	must("certs", "issue", "--role", "user", "alice")
	tok := must("token", "issue", "bob")

	addr := testkit.FreeAddr(t)
	logs := runCertMaster(t, certs, filepath.Join(dir, "events.db"), addr)
	env["CORRAL_MASTER"], env["CORRAL_CA"], env["CORRAL_TOKEN"] = addr, filepath.Join(certs, "ca.crt"), tok
	testkit.Eventually(t, 15*time.Second, "the master answers", func() (bool, string) {
		code, out, stderr := runEnv(bg, env, "status")
		return code == ExitOK, fmt.Sprintf("exit %d\n%s%s\nmaster:\n%s", code, out, stderr, logs.String())
	})
	return env, certs, must
}
