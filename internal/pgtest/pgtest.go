package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvServerURL names the variable that points the tests at a given server
// instead of a private one.
const EnvServerURL = "CORRAL_TEST_DATABASE_URL"

// shared is the test binary's private server, started by the first
// NewDatabase and stopped by Main.
var shared struct {
	sync.Mutex
	inMain  bool
	started bool
	srv     *Server
	err     error
}

// Main runs the test binary's tests, then stops the private server if one
// was started. Every package whose tests call NewDatabase has
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
func Main(m *testing.M) int {
	shared.Lock()
	shared.inMain = true
	shared.Unlock()
	code := m.Run()
	if err := closeLive(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// NewDatabase creates an empty database for t, drops it when t ends, and
// returns its URL. The server is CORRAL_TEST_DATABASE_URL's when set, else
// the test binary's private one, started on first use.
func NewDatabase(t testing.TB) string {
	t.Helper()
	server, given := os.LookupEnv(EnvServerURL)
	given = given && server != ""
	if !given {
		server = sharedServerURL(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, server)
	if err != nil {
		if given {
			lacking(t, fmt.Errorf("PostgreSQL at %s (%s) is unreachable: %w; start it, or unset %s to have the tests start their own", server, EnvServerURL, err, EnvServerURL))
		}
		t.Fatalf("pgtest: the private PostgreSQL at %s: %v", server, err)
	}
	defer conn.Close(ctx)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "corral_test_" + hex.EncodeToString(b[:])
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: creating database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, server)
		if err != nil {
			t.Logf("pgtest: dropping %s: %v", name, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Logf("pgtest: dropping %s: %v", name, err)
		}
	})
	u, err := url.Parse(server)
	if err != nil {
		t.Fatalf("pgtest: server URL: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}

// NewServer starts a private server for t alone, closed when t ends: for a
// test that stops and starts its database. It ignores
// CORRAL_TEST_DATABASE_URL, since a given server is not the test's to stop.
func NewServer(t testing.TB, opts Options) *Server {
	t.Helper()
	s, err := StartServer(opts)
	if err != nil {
		lacking(t, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	return s
}

func sharedServerURL(t testing.TB) string {
	t.Helper()
	shared.Lock()
	defer shared.Unlock()
	if !shared.inMain {
		t.Fatal("pgtest: this package's tests do not run through pgtest.Main, which stops the private PostgreSQL after them: add `func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }`")
	}
	if !shared.started {
		shared.started = true
		shared.srv, shared.err = StartServer(Options{Durable: benchmarking()})
	}
	if shared.err != nil {
		lacking(t, shared.err)
	}
	return shared.srv.URL()
}

// benchmarking says whether this run measures (-test.bench): benchmarks'
// figures stand for a real server, so its private server keeps
// PostgreSQL's durability settings.
func benchmarking() bool {
	f := flag.Lookup("test.bench")
	return f != nil && f.Value.String() != ""
}

// lacking ends t when no server can be had: a failure under CI=true, which
// never passes by skipping the real database, and where the cause is not a
// missing part (no binaries, no account to run them as); a skip otherwise,
// naming the cause and the cure.
func lacking(t testing.TB, err error) {
	t.Helper()
	missingPart := errors.Is(err, ErrNoBinaries) || errors.Is(err, ErrNoAccount) || os.Getenv(EnvServerURL) != ""
	if os.Getenv("CI") == "true" || !missingPart {
		t.Fatal(err)
	}
	t.Skip(err)
}
