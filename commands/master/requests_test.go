package master_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// Request ids belong to the user who sends them: bob reusing alice's id
// makes his own request, and the same id sent again for a different
// request is refused naming request_id. Both hold for ids the master
// answers from memory and, after a restart, for ids it learns from the log.
func TestRequestIDsBelongToTheirUser(t *testing.T) {
	for _, be := range backends {
		t.Run(be.Name, func(t *testing.T) {
			store := be.Open(t)
			r := startReplica(t, "m1", store)
			waitLeading(t, r)
			c := r.Client()
			for _, u := range []string{"alice", "bob"} {
				if _, err := c.SetQuota(as("root"), &apipb.SetQuotaRequest{RequestId: "quota-" + u, User: u, Band: "batch",
					Resources: &events.Resources{CpuMilli: 64000, MemoryBytes: 64 * gib}}); err != nil {
					t.Fatal(err)
				}
			}
			batchSpec := func(name string) *events.JobSpec {
				s := webSpec(name, 1)
				s.Priority = 4
				return s
			}
			alice, err := c.Submit(as("alice"), &apipb.SubmitRequest{RequestId: "r1", Spec: batchSpec("web")})
			if err != nil || alice.Duplicate {
				t.Fatalf("alice's submission: %+v %v", alice, err)
			}
			bob, err := c.Submit(as("bob"), &apipb.SubmitRequest{RequestId: "r1", Spec: batchSpec("web")})
			if err != nil || bob.Duplicate || bob.FirstPosition == alice.FirstPosition {
				t.Fatalf("bob's submission under alice's id: %+v %v, want a job of his own", bob, err)
			}
			r.M.View(func(s *projections.State) {
				if s.Job("bob", "web") == nil {
					t.Error("bob's job was not created")
				}
			})

			check := func(when string) {
				t.Helper()
				again, err := c.Submit(as("alice"), &apipb.SubmitRequest{RequestId: "r1", Spec: batchSpec("web")})
				if err != nil || !again.Duplicate || again.FirstPosition != alice.FirstPosition {
					t.Errorf("%s: alice's retry = %+v %v, want her first result", when, again, err)
				}
				again, err = c.Submit(as("bob"), &apipb.SubmitRequest{RequestId: "r1", Spec: batchSpec("web")})
				if err != nil || !again.Duplicate || again.FirstPosition != bob.FirstPosition {
					t.Errorf("%s: bob's retry = %+v %v, want his first result", when, again, err)
				}
				head := r.M.Position()
				_, err = c.Submit(as("alice"), &apipb.SubmitRequest{RequestId: "r1", Spec: batchSpec("other")})
				if codeOf(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "request_id") || !strings.Contains(err.Error(), "different request") {
					t.Errorf("%s: alice's id for another request: %v, want InvalidArgument naming request_id", when, err)
				}
				_, err = c.Kill(as("alice"), &apipb.KillRequest{RequestId: "r1", Job: "web"})
				if codeOf(err) != codes.InvalidArgument {
					t.Errorf("%s: alice's id for a kill: %v, want InvalidArgument", when, err)
				}
				if h := r.M.Position(); h != head {
					t.Errorf("%s: refused requests moved the log from %d to %d", when, head, h)
				}
			}
			check("answered from memory")
			// A new process learns the requests from the log, without their
			// fingerprints, and asks the store for them.
			r.Stop()
			r = startReplica(t, "m1", store)
			waitLeading(t, r)
			c = r.Client()
			check("after a restart")
		})
	}
}
