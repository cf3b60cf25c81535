package auth_test

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/corralhq/corral/commands/api"
	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/commands/auth"
	"github.com/corralhq/corral/commands/master"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/events/sqlitestore"
	"github.com/corralhq/corral/internal/testkit"
)

// cell is a master of a cell with every connection authenticated: its
// gRPC server takes the options of auth.Server, and its link dials agents
// with mutual TLS.
type cell struct {
	t       testing.TB
	dir     string
	local   *auth.Local
	store   *sqlitestore.Store
	m       *master.Master
	addr    string
	logs    *testkit.SyncBuffer // the master's log
	limiter *auth.Limiter
	secrets *auth.Secrets
}

type cellOptions struct {
	limiter   *auth.Limiter
	scheduler bool // run the scheduler and the link (for real agents)
	agents    []string
	// store, when set, wraps the log the master writes.
	store func(events.Store) events.Store
}

const cellName = "test"

func newCell(t testing.TB, o cellOptions) *cell {
	t.Helper()
	dir := t.TempDir()
	local, err := auth.SetUpLocal(filepath.Join(dir, "certs"), cellName, "master", "ada", o.agents...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	store, err := sqlitestore.Open(ctx, filepath.Join(dir, "events.db"), sqlitestore.Options{PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	c := &cell{t: t, dir: dir, local: local, store: store, logs: &testkit.SyncBuffer{}, limiter: o.limiter}
	log := slog.New(slog.NewTextHandler(c.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c.secrets = &auth.Secrets{Sealer: local.Sealer, Logger: log}
	var ms events.Store = store
	if o.store != nil {
		ms = o.store(store)
	}
	cfg := master.Config{Name: "master", Store: ms, LeaseTTL: 3 * time.Second, Logger: log}
	if o.scheduler {
		cfg.OnLeading = []func(context.Context, *master.Master){
			master.SchedulerLoop(master.SchedulerConfig{Interval: 50 * time.Millisecond}),
			master.Link(master.LinkConfig{Cell: cellName, Interval: 100 * time.Millisecond, UsageWindow: time.Hour,
				Dial: auth.LinkDial(local.Master, c.secrets)}),
		}
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c.addr = lis.Addr().String()
	cfg.Advertise = c.addr
	if c.m, err = master.New(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	c.secrets.View = c.m.View
	g := grpc.NewServer(auth.Server{Credentials: local.Master, Tokens: local.Tokens, Limiter: o.limiter, Secrets: c.secrets, Logger: log}.Options()...)
	api.NewService(c.m).Register(g)
	master.NewAgentRegistry(c.m, cellName, 100*time.Millisecond).Attach(g)
	go g.Serve(lis)
	done := make(chan struct{})
	go func() { defer close(done); c.m.Run(ctx) }()
	t.Cleanup(func() {
		g.Stop()
		cancel()
		<-done
		store.Close()
	})
	testkit.Eventually(t, 10*time.Second, "the master takes the lease", func() (bool, string) {
		return c.m.Leading(), "not leading"
	})
	return c
}

// person issues a certificate for name in role and returns a client of
// the API that presents it.
func (c *cell) person(name string, role auth.Role) apipb.CellClient {
	c.t.Helper()
	cert, key, err := c.local.Cell.Issue(role, name)
	if err != nil {
		c.t.Fatal(err)
	}
	return c.client(auth.ClientOptions{CAFile: c.local.CA, CertFile: cert, KeyFile: key})
}

func (c *cell) client(o auth.ClientOptions) apipb.CellClient {
	c.t.Helper()
	opts, err := o.DialOptions()
	if err != nil {
		c.t.Fatal(err)
	}
	return c.dial(opts...)
}

func (c *cell) dial(opts ...grpc.DialOption) apipb.CellClient {
	c.t.Helper()
	conn, err := grpc.NewClient(c.addr, opts...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { conn.Close() })
	return apipb.NewCellClient(conn)
}

// anonymousTLS dials with the cell's CA and no credentials.
func (c *cell) anonymousTLS() apipb.CellClient {
	cr := c.local.Master
	return c.dial(grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: cr.Roots(), MinVersion: tls.VersionTLS13})))
}

// forcedCert dials presenting the certificate given whatever CAs the
// server asks for.
func (c *cell) forcedCert(certFile, keyFile string) apipb.CellClient {
	c.t.Helper()
	kp, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		c.t.Fatal(err)
	}
	return c.dial(grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
		RootCAs: c.local.Master.Roots(), MinVersion: tls.VersionTLS13,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &kp, nil },
	})))
}

func (c *cell) head() int64 {
	c.t.Helper()
	h, err := c.store.Head(context.Background())
	if err != nil {
		c.t.Fatal(err)
	}
	return h
}

func (c *cell) events(typ string) []events.Event {
	c.t.Helper()
	evs, err := c.store.Read(context.Background(), 1, 100000)
	if err != nil {
		c.t.Fatal(err)
	}
	var out []events.Event
	for _, e := range evs {
		if typ == "" || e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

func spec(name string, mutate ...func(*events.JobSpec)) *events.JobSpec {
	s := &events.JobSpec{Name: name, TaskCount: 1, Command: "/bin/sh", Args: []string{"-c", "sleep 30"},
		Resources: &events.Resources{CpuMilli: 100, MemoryBytes: 64 << 20}}
	for _, m := range mutate {
		m(s)
	}
	return s
}

func code(err error) codes.Code { return status.Code(err) }

var bg = context.Background()

// waitFor polls ok for up to 10 s.
func waitFor(t testing.TB, ok func() bool, what string) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, what, func() (bool, string) { return ok(), "not yet" })
}
