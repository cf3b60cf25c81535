package master_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/commands/api/apitest"
	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/internal/testkit"
	"github.com/corralhq/corral/projections"
)

// The replica harness is apitest's, which the API's tests share; these
// are its names here.
type replica = apitest.Replica

const gib = apitest.GiB

var (
	backends     = apitest.Backends
	startReplica = apitest.StartReplica
	waitLeading  = apitest.WaitLeading
	do           = apitest.Do
	as           = apitest.As
	webSpec      = apitest.WebSpec
	root         = apitest.Root
)

func codeOf(err error) codes.Code { return status.Code(err) }

func TestFollowerRefusesWritesNamingTheLeader(t *testing.T) {
	store := backends[1].Open(t)
	a := startReplica(t, "master-a", store)
	waitLeading(t, a)
	b := startReplica(t, "master-b", store)
	testkit.Eventually(t, 10*time.Second, "master-b following the log", func() (bool, string) {
		return b.M.Position() >= a.M.Position(), fmt.Sprint(b.M.Position(), " of ", a.M.Position())
	})
	if b.M.Leading() {
		t.Fatal("two leaders")
	}
	_, err := b.Client().Submit(as("alice"), &apipb.SubmitRequest{RequestId: "x", Spec: webSpec("web", 1)})
	if codeOf(err) != codes.Unavailable || !strings.Contains(err.Error(), "master-a") || !strings.Contains(err.Error(), a.Addr) {
		t.Fatalf("write to a follower: %v, want Unavailable naming master-a at %s", err, a.Addr)
	}
	// The follower serves reads of what the leader wrote.
	res := do(t, a, commands.RegisterMachine{Meta: root, Machine: "m0", Address: "127.0.0.1:1", Capacity: projections.Resources{CPUMilli: 1000, MemoryBytes: gib, Ports: 10}})
	ms, err := b.Client().ListMachines(as("alice"), &apipb.ListMachinesRequest{Read: &apipb.ReadOptions{MinPosition: res.Last}})
	if err != nil || len(ms.Machines) != 1 {
		t.Fatalf("follower read: %v %v", ms, err)
	}
	// When the leader steps down, the follower takes over.
	a.Stop()
	waitLeading(t, b)
	if _, err := b.Client().Submit(as("alice"), &apipb.SubmitRequest{RequestId: "y", Spec: webSpec("web", 1)}); codeOf(err) != codes.ResourceExhausted && err != nil {
		t.Fatalf("write to the new leader: %v", err)
	}
}
