package apitest

import (
	"context"
	"net"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/commands/api"
	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/commands/master"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/events/pgstore"
	"github.com/corralhq/corral/events/sqlitestore"
	"github.com/corralhq/corral/internal/pgtest"
)

// GiB is a gibibyte in bytes.
const GiB = int64(1) << 30

// Root acts as the cell's admin.
var Root = commands.Meta{Actor: commands.Actor{User: "root", Admin: true}}

// Backend opens a new, empty store of one kind for a test.
type Backend struct {
	Name string
	Open func(t testing.TB) events.Store
}

// Backends are the stores a master runs on.
var Backends = []Backend{
	{"postgres", func(t testing.TB) events.Store {
		ctx := context.Background()
		s, err := pgstore.Open(ctx, pgtest.NewDatabase(t), pgstore.Options{PollInterval: 20 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}},
	{"sqlite", func(t testing.TB) events.Store {
		s, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "events.db"), sqlitestore.Options{PollInterval: 20 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}},
}

// Replica is one running master with a gRPC server on loopback.
type Replica struct {
	M    *master.Master
	Addr string
	Conn *grpc.ClientConn
	// Stop stops the replica (once; again is a no-op).
	Stop func()
}

// StartReplica runs a master named name over store, with "root" as its
// admin, serving the API on a port of its own.
func StartReplica(t testing.TB, name string, store events.Store) *Replica {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m, err := master.New(ctx, master.Config{Name: name, Advertise: lis.Addr().String(), Store: store, Admins: []string{"root"}, LeaseTTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	api.NewService(m).Register(g)
	go g.Serve(lis)
	done := make(chan struct{})
	go func() { defer close(done); m.Run(ctx) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	r := &Replica{M: m, Addr: lis.Addr().String(), Conn: conn}
	stopped := false
	r.Stop = func() {
		if stopped {
			return
		}
		stopped = true
		conn.Close()
		g.Stop()
		cancel()
		<-done
	}
	t.Cleanup(r.Stop)
	return r
}

// Client is the replica's API.
func (r *Replica) Client() apipb.CellClient { return apipb.NewCellClient(r.Conn) }

// As is a context whose calls name user (the insecure mode's header).
func As(user string) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), api.UserHeader, user)
}

// WaitLeading waits until r holds the lease, failing the test after 10 s.
func WaitLeading(t testing.TB, r *Replica) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !r.M.Leading() {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not take the lease", r.M.Name())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Do runs cmd through r's write path, failing the test on an error.
func Do(t testing.TB, r *Replica, cmd commands.Command) master.Result {
	t.Helper()
	res, err := r.M.Do(context.Background(), cmd)
	if err != nil {
		t.Fatalf("%T: %v", cmd, err)
	}
	return res
}

// WebSpec is a service of tasks replicas, each 1 CPU and 1 GiB, whose
// updates the test commits by hand.
func WebSpec(name string, tasks int32, args ...string) *events.JobSpec {
	return &events.JobSpec{Name: name, Priority: 9, TaskCount: tasks, Command: "/bin/server", Args: args,
		Resources: &events.Resources{CpuMilli: 1000, MemoryBytes: GiB}, Labels: map[string]string{"team": "web"},
		// Replacements serve once they ran a millisecond; the test commits
		// by hand.
		Update: &events.UpdatePolicy{MaxDisruptions: 1, MinHealthyTimeMs: 1, AutoCommit: proto.Bool(false)}}
}
