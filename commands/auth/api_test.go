package auth_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/commands/auth"
	"github.com/corralhq/corral/events"
)

// TestAPIAuthenticatesEveryCaller: only a certificate of the cell's CA or a
// token the cell issued gets through; the x-corral-user header names no
// one; agents and masters are not people.
func TestAPIAuthenticatesEveryCaller(t *testing.T) {
	c := newCell(t, cellOptions{})
	alice := c.person("alice", auth.RoleUser)
	if _, err := alice.Submit(bg, &apipb.SubmitRequest{RequestId: "a1", Spec: spec("web")}); err != nil {
		t.Fatal(err)
	}
	tok, err := c.local.Tokens.Issue("tess", auth.RoleUser)
	if err != nil {
		t.Fatal(err)
	}
	checkEveryCaller(t, c, alice, tok)
	checkForgedHeader(t, alice)
	checkRevocationEndsStream(t, c, alice, tok)
}

// checkEveryCaller lists and submits as each kind of caller: only a token
// or certificate of this cell, for a user or admin, gets through, and a
// refused caller appends nothing.
func checkEveryCaller(t *testing.T, c *cell, alice apipb.CellClient, tok string) {
	t.Helper()
	other, err := auth.Init(filepath.Join(t.TempDir(), "other"), "other")
	if err != nil {
		t.Fatal(err)
	}
	ocert, okey, err := other.Issue(auth.RoleAdmin, "ada")
	if err != nil {
		t.Fatal(err)
	}
	agentCert, agentKey, err := c.local.Cell.Issue(auth.RoleAgent, "m9")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		client apipb.CellClient
		want   codes.Code
		says   string
	}{
		{"plaintext", c.dial(grpc.WithTransportCredentials(insecure.NewCredentials())), codes.Unavailable, ""},
		{"TLS without credentials", c.anonymousTLS(), codes.Unauthenticated, "no credentials"},
		{"unknown token", c.client(auth.ClientOptions{CAFile: c.local.CA, Token: auth.TokenPrefix + "forged"}), codes.Unauthenticated, "not known to this cell"},
		// The client does not even offer a certificate the server's CA did
		// not sign; forced to, the handshake fails.
		{"certificate of another cell", c.client(auth.ClientOptions{CAFile: c.local.CA, CertFile: ocert, KeyFile: okey}), codes.Unauthenticated, "no credentials"},
		{"certificate of another cell, forced", c.forcedCert(ocert, okey), codes.Unavailable, ""},
		{"agent certificate", c.client(auth.ClientOptions{CAFile: c.local.CA, CertFile: agentCert, KeyFile: agentKey}), codes.PermissionDenied, "needs the user or admin role"},
		{"token", c.client(auth.ClientOptions{CAFile: c.local.CA, Token: tok}), codes.OK, ""},
		{"certificate", alice, codes.OK, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.client.List(bg, &apipb.ListRequest{})
			if code(err) != tc.want || !strings.Contains(errString(err), tc.says) {
				t.Errorf("List: %v, want %v saying %q", err, tc.want, tc.says)
			}
			before := c.head()
			_, err = tc.client.Submit(bg, &apipb.SubmitRequest{RequestId: "x-" + tc.name, Spec: spec("job-" + strings.ReplaceAll(tc.name, " ", "-"))})
			if code(err) != tc.want {
				t.Errorf("Submit: %v, want %v", err, tc.want)
			}
			if tc.want != codes.OK && c.head() != before {
				t.Errorf("a refused caller appended %d events", c.head()-before)
			}
		})
	}
}

// checkForgedHeader: a forged header changes nothing, alice acts as alice.
func checkForgedHeader(t *testing.T, alice apipb.CellClient) {
	t.Helper()
	forged := metadata.AppendToOutgoingContext(bg, auth.UserHeader, "ada")
	if _, err := alice.Submit(forged, &apipb.SubmitRequest{RequestId: "a2", Spec: spec("forged")}); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Get(bg, &apipb.GetRequest{Job: "forged"}); err != nil {
		t.Errorf("alice's job is not hers: %v", err)
	}
	if _, err := alice.Get(bg, &apipb.GetRequest{User: "ada", Job: "forged"}); code(err) != codes.NotFound {
		t.Errorf("the header made ada the owner: %v", err)
	}
}

// checkRevocationEndsStream: a stream opened with the token ends within a
// second of its revocation, and the token is refused from then on.
func checkRevocationEndsStream(t *testing.T, c *cell, alice apipb.CellClient, tok string) {
	t.Helper()
	tess := c.client(auth.ClientOptions{CAFile: c.local.CA, Token: tok})
	w, err := tess.Watch(bg, &apipb.EventsRequest{FromPosition: c.head() + 1})
	if err != nil {
		t.Fatal(err)
	}
	// The stream is open and waiting once an event appended now reaches it.
	if _, err := alice.Submit(bg, &apipb.SubmitRequest{RequestId: "a3", Spec: spec("watched")}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Recv(); err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() {
		for {
			if _, err := w.Recv(); err != nil {
				ended <- err
				return
			}
		}
	}()
	// A revoked token stops working (the file is read again within a second).
	revokedAt := time.Now()
	if n, err := c.local.Tokens.Revoke("tess"); err != nil || n != 1 {
		t.Fatalf("revoke: %d %v", n, err)
	}
	select {
	case err := <-ended:
		if code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "revoked") {
			t.Errorf("the stream ended with %v, want Unauthenticated saying the token was revoked", err)
		}
		if took := time.Since(revokedAt); took > time.Second {
			t.Errorf("the stream ended %s after the revocation, want within a second", took)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the stream opened with a revoked token still runs 5 s later")
	}
	revoked := c.client(auth.ClientOptions{CAFile: c.local.CA, Token: tok})
	waitFor(t, func() bool {
		_, err := revoked.List(bg, &apipb.ListRequest{})
		return code(err) == codes.Unauthenticated
	}, "the revoked token is refused")
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestAuthorizationThroughTheAPI: with real certificates, users change and
// kill only their own jobs, admins any, quotas are admins'; every refusal
// names the capability missing and is in the log as CommandRefused.
func TestAuthorizationThroughTheAPI(t *testing.T) {
	c := newCell(t, cellOptions{})
	alice, bob, ada := c.person("alice", auth.RoleUser), c.person("bob", auth.RoleUser), c.person("ada", auth.RoleAdmin)
	if _, err := alice.Submit(bg, &apipb.SubmitRequest{RequestId: "s1", Spec: spec("web")}); err != nil {
		t.Fatal(err)
	}
	refusals := refusalsOf(alice, bob)
	for _, r := range refusals {
		t.Run(r.name, func(t *testing.T) {
			err := r.call()
			if code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), r.says) {
				t.Errorf("%v, want PermissionDenied saying %q", err, r.says)
			}
		})
	}
	checkRefusalsLogged(t, c, alice, ada, len(refusals))
	// An admin may do all of it.
	if _, err := ada.SetQuota(bg, &apipb.SetQuotaRequest{RequestId: "d1", User: "alice", Band: "batch",
		Resources: &events.Resources{CpuMilli: 4000, MemoryBytes: 8 << 30}}); err != nil {
		t.Errorf("admin SetQuota: %v", err)
	}
	if _, err := ada.Kill(bg, &apipb.KillRequest{RequestId: "d2", User: "alice", Job: "web", Reason: "admin"}); err != nil {
		t.Errorf("admin Kill: %v", err)
	}
	// And the owner of her own.
	if _, err := alice.Submit(bg, &apipb.SubmitRequest{RequestId: "s2", Spec: spec("batch")}); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Kill(bg, &apipb.KillRequest{RequestId: "s3", Job: "batch"}); err != nil {
		t.Errorf("owner Kill: %v", err)
	}
}

// refusal is a call the API must refuse, and what the refusal says.
type refusal struct {
	name string
	call func() error
	says string
}

// refusalsOf are calls that alice, a user, and bob, another, may not make
// of alice's job web or of the cell.
func refusalsOf(alice, bob apipb.CellClient) []refusal {
	return []refusal{
		{"kill another's job", func() error {
			_, err := bob.Kill(bg, &apipb.KillRequest{RequestId: "b1", User: "alice", Job: "web"})
			return err
		}, "only its owner or an admin may change it"},
		{"kill another's task", func() error {
			_, err := bob.KillTask(bg, &apipb.KillTaskRequest{RequestId: "b2", User: "alice", Job: "web", Index: 0})
			return err
		}, "only its owner or an admin may change it"},
		{"kill another's jobs by selector", func() error {
			_, err := bob.Kill(bg, &apipb.KillRequest{RequestId: "b3", User: "alice", Selector: "app=web"})
			return err
		}, "needs the admin capability"},
		{"commit another's update", func() error {
			_, err := bob.CommitUpdate(bg, &apipb.JobRequest{RequestId: "b4", User: "alice", Job: "web"})
			return err
		}, "only its owner or an admin may change it"},
		{"set a quota", func() error {
			_, err := alice.SetQuota(bg, &apipb.SetQuotaRequest{RequestId: "a5", User: "alice", Band: "production",
				Resources: &events.Resources{CpuMilli: 1000000, MemoryBytes: 1 << 40}})
			return err
		}, "needs the admin capability"},
		{"drain a machine", func() error {
			_, err := bob.DrainMachine(bg, &apipb.DrainMachineRequest{RequestId: "b6", Machine: "m1", Draining: true})
			return err
		}, "admin capability"},
		{"remove a machine", func() error {
			_, err := bob.RemoveMachine(bg, &apipb.RemoveMachineRequest{RequestId: "b7", Machine: "m1"})
			return err
		}, "admin capability"},
	}
}

// checkRefusalsLogged: the job is untouched, and the n refusals are
// history, in the log and through the API.
func checkRefusalsLogged(t *testing.T, c *cell, alice, ada apipb.CellClient, n int) {
	t.Helper()
	v, err := alice.Get(bg, &apipb.GetRequest{Job: "web"})
	if err != nil || v.State == "DEAD" {
		t.Fatalf("alice's job after the refusals: %v %v", v.GetState(), err)
	}
	waitFor(t, func() bool { return len(c.events("CommandRefused")) >= n }, "the refusals are in the log")
	got := map[string]*events.CommandRefused{}
	for _, e := range c.events("CommandRefused") {
		p := e.Data.(*events.CommandRefused)
		if p.Code != "PermissionDenied" || p.Reason == "" || e.Actor != p.Actor {
			t.Errorf("refusal event %+v (actor %s)", p, e.Actor)
		}
		got[p.Actor+" "+p.Command+" "+p.Target] = p
	}
	for _, want := range []string{"bob KillJob job alice/web", "bob KillTask task alice/web/0", "bob CommitUpdate job alice/web", "alice SetQuota quota alice production"} {
		if got[want] == nil {
			t.Errorf("no CommandRefused for %q; have %v", want, keys(got))
		}
	}
	// Through the API too, for anyone who looks.
	list, err := ada.Events(bg, &apipb.EventsRequest{Type: "CommandRefused"})
	if err != nil || len(list.Events) < 4 || !strings.Contains(list.Events[0].PayloadJson, "PermissionDenied") {
		t.Errorf("Events(CommandRefused): %v %v", list, err)
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
