package api_test

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/commands/api/apitest"
	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/projections"
)

// A plan now of a job that does not live is its submission (no --at
// needed), and a planned submission (submit, corral job submit --dry-run)
// is refused where Submit refuses: a live job of that name. Nothing is
// appended either way.
func TestPlanOfASubmission(t *testing.T) {
	for _, be := range apitest.Backends {
		t.Run(be.Name, func(t *testing.T) {
			r := apitest.StartReplica(t, "master1", be.Open(t))
			apitest.WaitLeading(t, r)
			c := r.Client()
			apitest.Do(t, r, commands.RegisterMachine{Meta: apitest.Root, Machine: "m0", Address: "127.0.0.1:9000",
				Capacity: projections.Resources{CPUMilli: 8000, MemoryBytes: 32 * apitest.GiB, Ports: 100}})
			apitest.Do(t, r, commands.SetQuota{Meta: apitest.Root, User: "alice", Band: "production", Resources: projections.Resources{CPUMilli: 4000, MemoryBytes: 8 * apitest.GiB}})

			for _, submit := range []bool{false, true} {
				p, err := c.PlanUpdate(apitest.As("alice"), &apipb.UpdateRequest{Spec: apitest.WebSpec("fresh", 2), Submit: submit})
				if err != nil || p.CurrentVersion != 0 || p.SpecVersion != 1 || len(p.Changes) == 0 || !strings.Contains(p.Changes[0], "submitted") || len(p.Placements) != 2 {
					t.Fatalf("plan (submit %v) of a new job: %v %v", submit, p, err)
				}
			}
			// Over quota: refused as Submit refuses it.
			if _, err := c.PlanUpdate(apitest.As("alice"), &apipb.UpdateRequest{Spec: apitest.WebSpec("fresh", 5), Submit: true}); codeOf(err) != codes.ResourceExhausted {
				t.Fatalf("planned submission over quota: %v, want ResourceExhausted", err)
			}
			if _, err := c.Submit(apitest.As("alice"), &apipb.SubmitRequest{RequestId: "s1", Spec: apitest.WebSpec("web", 1)}); err != nil {
				t.Fatal(err)
			}
			_, err := c.PlanUpdate(apitest.As("alice"), &apipb.UpdateRequest{Spec: apitest.WebSpec("web", 2), Submit: true})
			if codeOf(err) != codes.AlreadyExists || !strings.Contains(err.Error(), "alice/web exists") {
				t.Fatalf("planned submission of a live job: %v, want AlreadyExists", err)
			}
			// Without submit, the same spec plans the update.
			if p, err := c.PlanUpdate(apitest.As("alice"), &apipb.UpdateRequest{Spec: apitest.WebSpec("web", 2)}); err != nil || p.CurrentVersion != 1 || p.SpecVersion != 2 {
				t.Fatalf("plan of web's update: %v %v", p, err)
			}
			if _, err := c.PlanUpdate(apitest.As("alice"), &apipb.UpdateRequest{Submit: true, Job: "web", RevertTo: 1}); codeOf(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "spec") {
				t.Fatalf("planned submission without a spec: %v, want InvalidArgument naming spec", err)
			}
			var jobs int
			var webVersion int64
			r.M.View(func(s *projections.State) {
				jobs = len(s.Jobs)
				if j := s.Job("alice", "web"); j != nil {
					webVersion = j.LatestVersion()
				}
			})
			if jobs != 1 || webVersion != 1 {
				t.Fatalf("after the plans: %d jobs, web at version %d; want only web, at version 1", jobs, webVersion)
			}
		})
	}
}

// WhoAmI on a master without authentication: the name the header sends,
// an admin when the master's Admins list names it; no name, no answer.
func TestWhoAmIWithoutAuthentication(t *testing.T) {
	r := apitest.StartReplica(t, "master1", apitest.Backends[1].Open(t))
	c := r.Client()
	for user, role := range map[string]string{"alice": "user", "root": "admin"} {
		w, err := c.WhoAmI(apitest.As(user), &apipb.WhoAmIRequest{})
		if err != nil || w.User != user || w.Role != role || w.Via != "header" {
			t.Errorf("WhoAmI as %s: %v %v", user, w, err)
		}
	}
	if _, err := c.WhoAmI(context.Background(), &apipb.WhoAmIRequest{}); codeOf(err) != codes.Unauthenticated {
		t.Errorf("WhoAmI without a name: %v, want Unauthenticated", err)
	}
}
