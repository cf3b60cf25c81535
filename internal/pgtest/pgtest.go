package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultServerURL is used when CORRAL_TEST_DATABASE_URL is unset.
const DefaultServerURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// ServerURL returns the server tests create their databases on.
func ServerURL() string {
	if u := os.Getenv("CORRAL_TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultServerURL
}

// NewDatabase creates an empty database for t, drops it when t ends, and
// returns its URL.
func NewDatabase(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	server := ServerURL()
	conn, err := pgx.Connect(ctx, server)
	if err != nil {
		Unreachable(t, err)
		return ""
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

// Unreachable fails the test under CI=true and skips it otherwise.
func Unreachable(t testing.TB, err error) {
	t.Helper()
	msg := fmt.Sprintf("PostgreSQL at %s is unreachable (%v); start it with `pg_ctlcluster --skip-systemctl-redirect 15 main start` or set CORRAL_TEST_DATABASE_URL", ServerURL(), err)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}
