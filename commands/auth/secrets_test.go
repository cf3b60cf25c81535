package auth_test

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/commands/auth"
	"github.com/corralhq/corral/events"
)

// TestSecretsReachOnlyTheTask runs a job with a secret env value on a real
// agent over mutual TLS: the task sees the value; the log's bytes, every
// reply of the API (views, events, the watch stream, the state at a
// position) and the master's and agent's logs do not. An update that
// sends the placeholder back keeps the value.
func TestSecretsReachOnlyTheTask(t *testing.T) {
	c := newCell(t, cellOptions{scheduler: true, agents: []string{"m1"}})
	a := c.startAgent(t, "m1", c.local.Agents["m1"])
	alice := c.person("alice", auth.RoleUser)
	raw := make([]byte, 12)
	rand.Read(raw)
	secret := "s3cr3t-" + hex.EncodeToString(raw)
	script := `echo "key=$API_KEY plain=$PLAIN"; exec sleep 30`
	job := spec("api", func(s *events.JobSpec) {
		s.Args = []string{"-c", script}
		s.Env = map[string]string{"API_KEY": secret, "PLAIN": "visible"}
		s.SecretEnv = []string{"API_KEY"}
	})
	// A secret named with no value is refused, naming it.
	missing := spec("nokey", func(s *events.JobSpec) { s.SecretEnv = []string{"API_KEY"} })
	if _, err := alice.Submit(bg, &apipb.SubmitRequest{RequestId: "s0", Spec: missing}); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "secret_env[0]: API_KEY has no value") {
		t.Fatalf("secret_env with no value: %v", err)
	}
	rep, err := alice.Submit(bg, &apipb.SubmitRequest{RequestId: "s1", Spec: job})
	if err != nil {
		t.Fatal(err)
	}
	stdout := filepath.Join(a.dir, "tasks", "alice", "api", "0", "logs", "stdout")
	waitFor(t, func() bool {
		b, _ := os.ReadFile(stdout)
		return strings.Contains(string(b), "key="+secret+" plain=visible")
	}, "the task started with its secret")

	sealed := checkSealedInLog(t, c, secret)
	v := checkRepliesRedact(t, alice, rep.LastPosition, secret)
	// An update that sends the view back (with the placeholder) keeps the
	// value; the restarted task has it.
	upd := proto.Clone(v.Spec).(*events.JobSpec)
	upd.Env["PLAIN"] = "changed"
	if _, err := alice.Update(bg, &apipb.UpdateRequest{RequestId: "u1", Spec: upd}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		b, _ := os.ReadFile(stdout)
		return strings.Contains(string(b), "key="+secret+" plain=changed")
	}, "the updated task kept its secret")

	checkOnlyTheMasterSeals(t, c, alice, sealed)
	checkSecretNotKept(t, c, a, secret)
}

// checkSealedInLog: the event holds ciphertext bound to the job, not the
// value; it returns the ciphertext.
func checkSealedInLog(t *testing.T, c *cell, secret string) []byte {
	t.Helper()
	var sealed []byte
	for _, e := range c.events("JobSubmitted") {
		sp := e.Data.(*events.JobSubmitted).Spec
		if _, ok := sp.Env["API_KEY"]; ok || len(sp.SealedEnv) == 0 || sp.Env["PLAIN"] != "visible" {
			t.Errorf("JobSubmitted spec env %v sealed %d bytes", sp.Env, len(sp.SealedEnv))
		}
		sealed = sp.SealedEnv
	}
	got, err := c.local.Sealer.Open("alice", "api", sealed)
	if err != nil || got["API_KEY"] != secret {
		t.Errorf("the sealed value does not open to the secret: %v %v", got, err)
	}
	if _, err := c.local.Sealer.Open("bob", "api", sealed); err == nil {
		t.Error("alice's sealed secrets open for bob's job")
	}

	return sealed
}

// checkRepliesRedact: every reply, in every form a client can get up to
// position last, shows a placeholder for the secret; it returns Get's view.
func checkRepliesRedact(t *testing.T, alice apipb.CellClient, last int64, secret string) *apipb.JobView {
	t.Helper()
	var replies []proto.Message
	add := func(m proto.Message, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		replies = append(replies, m)
	}
	add(alice.Get(bg, &apipb.GetRequest{Job: "api", Read: &apipb.ReadOptions{MinPosition: last}}))
	add(alice.List(bg, &apipb.ListRequest{}))
	add(alice.Events(bg, &apipb.EventsRequest{}))
	add(alice.StateAt(bg, &apipb.StateAtRequest{Position: last}))
	w, err := alice.Watch(bg, &apipb.EventsRequest{FromPosition: 1})
	if err != nil {
		t.Fatal(err)
	}
	for {
		ev, err := w.Recv()
		if err != nil {
			t.Fatal(err)
		}
		replies = append(replies, ev)
		if ev.Position >= last {
			break
		}
	}
	redacted := 0
	for _, m := range replies {
		js := protojson.Format(m)
		if strings.Contains(js, secret) {
			t.Errorf("a %T shows the secret: %s", m, js)
		}
		if strings.Contains(js, "sealed_env") || strings.Contains(js, "sealedEnv") {
			t.Errorf("a %T shows the sealed value: %s", m, js)
		}
		redacted += strings.Count(js, auth.Redacted)
	}
	if redacted < 5 {
		t.Errorf("the replies show %q %d times; want it in place of the value in each", auth.Redacted, redacted)
	}
	v := replies[0].(*apipb.JobView)
	if v.Spec.Env["API_KEY"] != auth.Redacted || v.Spec.Env["PLAIN"] != "visible" {
		t.Errorf("Get shows env %v", v.Spec.Env)
	}

	return v
}

// checkOnlyTheMasterSeals: a placeholder is no value for a new job, nor is
// a client's sealed_env.
func checkOnlyTheMasterSeals(t *testing.T, c *cell, alice apipb.CellClient, sealed []byte) {
	for _, tc := range []struct {
		name string
		spec *events.JobSpec
		says string
	}{
		{"sealed_env from a client", spec("copy", func(s *events.JobSpec) { s.SecretEnv = []string{"API_KEY"}; s.SealedEnv = sealed }), "sealed_env: set by the master only"},
		{"placeholder on submit", spec("ph", func(s *events.JobSpec) {
			s.SecretEnv = []string{"API_KEY"}
			s.Env = map[string]string{"API_KEY": auth.Redacted}
		}), "a new job needs the value itself"},
		{"secret in an override", spec("ov", func(s *events.JobSpec) {
			s.SecretEnv = []string{"API_KEY"}
			s.Overrides = map[int32]*events.TaskOverride{0: {Env: map[string]string{"API_KEY": "x"}}}
		}), "overrides[0].env[API_KEY]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := alice.Submit(bg, &apipb.SubmitRequest{RequestId: "bad-" + tc.spec.Name, Spec: tc.spec})
			if code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("%s: %v, want InvalidArgument saying %q", tc.name, err, tc.says)
			}
			// The running task's agent appends meanwhile: look for the job's
			// own events rather than at the head.
			for _, e := range c.events("") {
				if e.Stream == events.JobStream("alice", tc.spec.Name) {
					t.Errorf("%s: appended %s", tc.name, e.Type)
				}
			}
		})
	}

}

// checkSecretNotKept: the secret is not in the log's bytes, nor in the
// master's and the agent's logs; the agent keeps it only in its 0600 state
// files.
func checkSecretNotKept(t *testing.T, c *cell, a *liveAgent, secret string) {
	t.Helper()
	b64 := base64.StdEncoding.EncodeToString([]byte(secret))
	files, _ := filepath.Glob(filepath.Join(c.dir, "events.db*"))
	if len(files) == 0 {
		t.Fatal("no log files")
	}
	for _, f := range files {
		if n := countIn(t, f, secret) + countIn(t, f, b64); n > 0 {
			t.Errorf("%s holds the secret %d times", f, n)
		}
	}
	if strings.Contains(c.logs.String(), secret) || strings.Contains(a.logs.String(), secret) {
		t.Error("the secret is in the master's or the agent's log")
	}
	// The agent keeps it only in its 0600 state files.
	for _, f := range []string{"state.0", "state.1"} {
		if st, err := os.Stat(filepath.Join(a.dir, f)); err == nil && st.Mode().Perm() != 0o600 {
			t.Errorf("agent %s is %v", f, st.Mode().Perm())
		}
	}
}

func countIn(t *testing.T, path, s string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), s)
}
