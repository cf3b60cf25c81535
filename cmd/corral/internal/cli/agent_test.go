package cli

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/corralhq/corral/agent"
	"github.com/corralhq/corral/agent/agentpb"
	"github.com/corralhq/corral/commands/master"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/internal/testkit"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// fakeRegistry is agentpb's Master service: a follower names the leader,
// the leader records registrations.
type fakeRegistry struct {
	agentpb.UnimplementedMasterServer
	leader string
	mu     sync.Mutex
	got    []*agentpb.MachineInfo
}

func (f *fakeRegistry) Register(ctx context.Context, info *agentpb.MachineInfo) (*agentpb.RegisterReply, error) {
	if f.leader != "" {
		_ = grpc.SetTrailer(ctx, metadata.Pairs(master.LeaderHeader, f.leader))
		return nil, status.Error(codes.Unavailable, "not the leader")
	}
	f.mu.Lock()
	f.got = append(f.got, info)
	f.mu.Unlock()
	return &agentpb.RegisterReply{Cell: "dev", Epoch: 1}, nil
}

func serveRegistry(t *testing.T, f *fakeRegistry) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	agentpb.RegisterMasterServer(g, f)
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	return lis.Addr().String()
}

func TestAgentRegistersWithTheLeaderOfSeveralMasters(t *testing.T) {
	leader := &fakeRegistry{}
	leaderAddr := serveRegistry(t, leader)
	follower := &fakeRegistry{leader: leaderAddr}
	dead, _ := net.Listen("tcp", "127.0.0.1:0")
	deadAddr := dead.Addr().String()
	dead.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan string, 1)
	r := &agentRun{
		cfg: agent.Config{Name: "m1", ListenAddr: "127.0.0.1:0", DataDir: t.TempDir(), Cgroups: "sampling",
			Capacity: &events.Resources{CpuMilli: 1000, MemoryBytes: 1 << 30, DiskBytes: 1 << 30, Ports: 10}},
		masters: []string{deadAddr, serveRegistry(t, follower)},
		ready:   func(addr string) { ready <- addr },
	}
	done := make(chan error, 1)
	go func() { done <- r.run(ctx) }()
	addr := <-ready
	testkit.Eventually(t, 10*time.Second, "the agent registers with the leader", func() (bool, string) {
		leader.mu.Lock()
		defer leader.mu.Unlock()
		return len(leader.got) > 0, "no registration yet"
	})
	if got := leader.got[0]; got.Name != "m1" || got.Address != addr || got.Capacity.GetCpuMilli() != 1000 {
		t.Fatalf("registered %v, want m1 at %s", got, addr)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
