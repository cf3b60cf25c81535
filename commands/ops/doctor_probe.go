package ops

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"strings"
	"time"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/events/pgstore"
	"github.com/corralhq/corral/events/storeopen"
	"github.com/corralhq/corral/migrations"
)

type storeProbe struct {
	err        error // the store does not answer
	head       int64
	lease      events.Lease
	leaseOK    bool
	version    uint
	dirty      bool
	versionErr error
	latest     uint
	flavor     migrations.Flavor
}

// probeStore reads the store without writing to it: PostgreSQL and
// CockroachDB through pgstore (which does not migrate on Open), a SQLite
// file read-only.
func probeStore(ctx context.Context, url string, timeout time.Duration) *storeProbe {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	p := &storeProbe{}
	if storeopen.IsSQL(url) {
		p.flavor = migrations.Postgres
		p.latest, _ = migrations.Latest(p.flavor)
		s, err := pgstore.Open(ctx, url, pgstore.Options{})
		if err != nil {
			p.err = err
			return p
		}
		defer s.Close()
		if p.head, p.err = s.Head(ctx); p.err != nil {
			return p
		}
		p.lease, p.leaseOK, _ = s.CurrentLease(ctx, events.LeaderLease)
		var v int64
		if err := s.Pool().QueryRow(ctx, `SELECT version, dirty FROM schema_migrations`).Scan(&v, &p.dirty); err != nil {
			p.versionErr = err
		}
		p.version = uint(v)
		return p
	}
	p.flavor = migrations.SQLite
	p.latest, _ = migrations.Latest(p.flavor)
	path := strings.TrimPrefix(strings.TrimPrefix(url, "sqlite://"), "file://")
	if _, err := os.Stat(path); err != nil {
		p.err = err
		return p
	}
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		p.err = err
		return p
	}
	defer db.Close()
	if err := db.QueryRowContext(ctx, `SELECT COALESCE(max(position), 0) FROM events`).Scan(&p.head); err != nil {
		p.err = err
		return p
	}
	var exp int64
	err = db.QueryRowContext(ctx, `SELECT holder, epoch, expires_at FROM leases WHERE name = ?`, events.LeaderLease).Scan(&p.lease.Holder, &p.lease.Epoch, &exp)
	if err == nil {
		p.leaseOK, p.lease.Name, p.lease.ExpiresAt = true, events.LeaderLease, time.UnixMicro(exp)
	} else if !errors.Is(err, sql.ErrNoRows) {
		p.err = err
		return p
	}
	var v int64
	if err := db.QueryRowContext(ctx, `SELECT version, dirty FROM schema_migrations`).Scan(&v, &p.dirty); err != nil {
		p.versionErr = err
	}
	p.version = uint(v)
	return p
}
