package client

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/corralhq/corral/commands/apipb"
)

// fakeMaster answers Submit as a leader, a follower naming the leader, a
// master with no leader yet, or one that hangs.
type fakeMaster struct {
	apipb.UnimplementedCellServer
	name   string
	leader string // set: a follower naming this leader
	fail   int    // Unavailable this many times first
	hang   bool   // never answers

	mu    sync.Mutex
	ids   []string
	users []string
}

func (f *fakeMaster) Submit(ctx context.Context, r *apipb.SubmitRequest) (*apipb.MutationReply, error) {
	f.mu.Lock()
	f.ids = append(f.ids, r.RequestId)
	md, _ := metadata.FromIncomingContext(ctx)
	f.users = append(f.users, strings.Join(md.Get(UserHeader), ","))
	hang, leader := f.hang, f.leader
	fail := f.fail > 0
	if fail {
		f.fail--
	}
	f.mu.Unlock()
	switch {
	case hang:
		<-ctx.Done()
		return nil, ctx.Err()
	case leader != "":
		_ = grpc.SetTrailer(ctx, metadata.Pairs(LeaderHeader, leader))
		return nil, status.Errorf(codes.Unavailable, "master %s does not lead", f.name)
	case fail:
		return nil, status.Error(codes.Unavailable, "no leader is known yet; retry shortly")
	}
	return &apipb.MutationReply{Message: "appended by " + f.name}, nil
}

func (f *fakeMaster) seen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.ids...)
}

func serve(t *testing.T, f *fakeMaster) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	apipb.RegisterCellServer(g, f)
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	return lis.Addr().String()
}

func submit(ctx context.Context, api apipb.CellClient, id string, o ...grpc.CallOption) (*apipb.MutationReply, error) {
	return api.Submit(ctx, &apipb.SubmitRequest{RequestId: id}, o...)
}

func noSleep(context.Context, time.Duration) error { return nil }

// A master that hangs (paused, partitioned) costs one attempt: the request
// goes on to the next master under the same id, so whatever the hung one
// applied is applied once.
func TestHungMasterCostsOneAttempt(t *testing.T) {
	hung := &fakeMaster{name: "hung", hang: true}
	live := &fakeMaster{name: "live", fail: 1}
	c, err := New([]string{serve(t, hung), serve(t, live)}, "alice", Options{AttemptTimeout: 200 * time.Millisecond, Sleep: noSleep})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rep, err := c.Mutate(context.Background(), submit)
	if err != nil || rep.Message != "appended by live" {
		t.Fatalf("%v %v", rep, err)
	}
	all := append(hung.seen(), live.seen()...)
	if len(hung.seen()) == 0 || len(live.seen()) < 2 {
		t.Fatalf("hung saw %v, live %v", hung.seen(), live.seen())
	}
	for _, id := range all {
		if id != all[0] || !strings.HasPrefix(id, "cli-") {
			t.Fatalf("request ids %v: want one id on every attempt", all)
		}
	}
	live.mu.Lock()
	user := live.users[0]
	live.mu.Unlock()
	if user != "alice" {
		t.Fatalf("user header %q", user)
	}
	// The master that answered is asked first next time.
	if c.Current() == c.addrs[0] {
		t.Fatalf("next call goes to %s, the hung master", c.Current())
	}
}

// A follower's answer naming the leader is followed at once, and the
// leader learned joins the masters tried.
func TestFollowerNamesTheLeader(t *testing.T) {
	leader := &fakeMaster{name: "leader"}
	leaderAddr := serve(t, leader)
	follower := &fakeMaster{name: "follower", leader: leaderAddr}
	c, err := New([]string{serve(t, follower)}, "alice", Options{Sleep: noSleep})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if rep, err := c.Mutate(context.Background(), submit); err != nil || rep.Message != "appended by leader" {
		t.Fatalf("%v %v", rep, err)
	}
	if c.Current() != leaderAddr {
		t.Fatalf("current master %s, want the leader %s", c.Current(), leaderAddr)
	}
}

// Retries are bounded: by MaxAttempts, by the caller's context, and at once
// when no master process runs (GiveUpWhenDown); a refusal is never retried.
func TestRetriesAreBounded(t *testing.T) {
	never := &fakeMaster{name: "never", fail: 1 << 30}
	c, err := New([]string{serve(t, never)}, "alice", Options{MaxAttempts: 3, Sleep: noSleep})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Mutate(context.Background(), submit); status.Code(err) != codes.Unavailable || len(never.seen()) != 3 {
		t.Fatalf("%v after %d attempts, want Unavailable after 3", err, len(never.seen()))
	}

	unbounded, err := New([]string{serve(t, &fakeMaster{name: "never", fail: 1 << 30})}, "alice", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer unbounded.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if _, err := unbounded.Mutate(ctx, submit); err == nil || ctx.Err() == nil {
		t.Fatalf("%v: want the caller's deadline to end it", err)
	}

	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close()
	down, err := New([]string{deadAddr}, "alice", Options{GiveUpWhenDown: true})
	if err != nil {
		t.Fatal(err)
	}
	defer down.Close()
	start := time.Now()
	if _, err := down.Mutate(context.Background(), submit); status.Code(err) != codes.Unavailable || time.Since(start) > 5*time.Second {
		t.Fatalf("%v after %s, want Unavailable at once", err, time.Since(start))
	}

	refusing := &fakeMaster{name: "x"}
	r, err := New([]string{serve(t, refusing)}, "alice", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	_, err = r.Mutate(context.Background(), func(ctx context.Context, api apipb.CellClient, id string, o ...grpc.CallOption) (*apipb.MutationReply, error) {
		return api.Kill(ctx, &apipb.KillRequest{RequestId: id}, o...)
	})
	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("a refusal: %v, want it returned as it is", err)
	}
}

func TestNewRefusesNoMastersAndNoUser(t *testing.T) {
	if _, err := New([]string{" ", ""}, "alice", Options{}); err == nil {
		t.Error("no master address: accepted")
	}
	if _, err := New([]string{"127.0.0.1:1"}, "", Options{}); err == nil {
		t.Error("no user: accepted")
	}
}
