package storeopen

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/events/pgstore"
	"github.com/corralhq/corral/events/sqlitestore"
)

// Options apply to whichever backend the URL names.
type Options struct {
	Clock        func() time.Time
	PollInterval time.Duration
	// NoMigrate opens an existing log for a reader: PostgreSQL without
	// applying migrations, and a SQLite file only if it exists (a reader
	// pointed at the wrong directory must not leave an empty log there).
	NoMigrate bool
}

// IsSQL reports whether url names a PostgreSQL or CockroachDB store.
func IsSQL(url string) bool {
	for _, p := range []string{"postgres://", "postgresql://", "cockroachdb://"} {
		if strings.HasPrefix(url, p) {
			return true
		}
	}
	return false
}

// Open opens (and migrates) the store at url.
func Open(ctx context.Context, url string, opts Options) (events.Store, error) {
	if url == "" {
		return nil, fmt.Errorf("store URL: must not be empty (postgres://... or a SQLite file path)")
	}
	if IsSQL(url) {
		s, err := pgstore.Open(ctx, url, pgstore.Options{Clock: opts.Clock, PollInterval: opts.PollInterval})
		if err != nil {
			return nil, err
		}
		if !opts.NoMigrate {
			if err := s.Migrate(ctx); err != nil {
				s.Close()
				return nil, err
			}
		}
		return s, nil
	}
	if i := strings.Index(url, "://"); i >= 0 && !strings.HasPrefix(url, "sqlite://") && !strings.HasPrefix(url, "file://") {
		return nil, fmt.Errorf("store URL: scheme %q is not supported (use postgres://, cockroachdb:// or a SQLite file path)", url[:i])
	}
	path := strings.TrimPrefix(strings.TrimPrefix(url, "sqlite://"), "file://")
	if opts.NoMigrate {
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("no log at %s: %w", path, err)
		}
	}
	return sqlitestore.Open(ctx, path, sqlitestore.Options{Clock: opts.Clock, PollInterval: opts.PollInterval})
}
