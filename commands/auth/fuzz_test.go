package auth_test

import (
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/commands/auth"
	"github.com/corralhq/corral/events"
)

// FuzzSubmitRequest sends arbitrary SubmitRequests through the whole API
// (mutual TLS, authentication, limits, sealing, the service, Decide, the
// log): nothing panics, a refusal is a status a person can act on (never
// Unknown, Internal or Unavailable) and appends nothing, and an accepted
// job never shows a secret's value. The seed corpus is in
// testdata/fuzz/FuzzSubmitRequest.
func FuzzSubmitRequest(f *testing.F) {
	for _, r := range []*apipb.SubmitRequest{
		{RequestId: "r1", Spec: spec("web")},
		{RequestId: "r2", Spec: spec("sec", func(s *events.JobSpec) {
			s.Env = map[string]string{"K": "v", "P": "p"}
			s.SecretEnv = []string{"K"}
		})},
		{Spec: spec("sealed", func(s *events.JobSpec) { s.SealedEnv = []byte{1, 2, 3} })},
		{RequestId: "r4", Spec: spec("Bad Name")},
	} {
		b, err := proto.Marshal(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	c := newCell(f, cellOptions{})
	alice := c.person("alice", auth.RoleUser)
	f.Fuzz(func(t *testing.T, raw []byte) {
		r := &apipb.SubmitRequest{}
		if proto.Unmarshal(raw, r) != nil {
			return // gRPC refuses it before any of ours runs
		}
		var secrets []string
		for _, n := range r.GetSpec().GetSecretEnv() {
			if _, ok := r.Spec.Env[n]; ok {
				secrets = append(secrets, n)
			}
		}
		before := headOf(t, c)
		rep, err := alice.Submit(bg, r)
		if err != nil {
			switch code(err) {
			case codes.InvalidArgument, codes.AlreadyExists, codes.NotFound, codes.FailedPrecondition, codes.ResourceExhausted:
			default:
				t.Fatalf("refused with %v: %v", code(err), err)
			}
			if h := headOf(t, c); h != before {
				t.Fatalf("a refused request moved the log by %d", h-before)
			}
			return
		}
		if rep.Duplicate {
			return // a request id seen before: its first answer
		}
		v, err := alice.Get(bg, &apipb.GetRequest{Job: r.Spec.Name})
		if err != nil {
			t.Fatalf("the accepted job: %v", err)
		}
		for _, n := range secrets {
			if v.Spec.Env[n] != auth.Redacted || len(v.Spec.SealedEnv) != 0 {
				t.Fatalf("secret %s shown as %q", n, v.Spec.Env[n])
			}
		}
		// Kill it so the name can be tried again.
		_, _ = alice.Kill(bg, &apipb.KillRequest{Job: r.Spec.Name})
	})
}

func headOf(t *testing.T, c *cell) int64 {
	t.Helper()
	h, err := c.store.Head(bg)
	if err != nil {
		t.Fatal(err)
	}
	return h
}
