package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// openInfra opens the Infrastore file path, given by flag, or says why
// this binary cannot.
func (a *app) openInfra(ctx context.Context, flag, path string, opts InfraOptions) (Infra, error) {
	if a.env.OpenInfra == nil {
		return nil, errors.New("this corral binary was built without the Infrastore")
	}
	if !opts.ReadOnly {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, err
		}
	} else if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("%s %s: %w", flag, path, err)
	}
	inf, err := a.env.OpenInfra(ctx, path, opts)
	if err != nil {
		if strings.Contains(err.Error(), "lock") {
			instead := "query it through the master, without " + flag
			if flag == "--infrastore" {
				instead = "replay the cell's log with --data or --store instead"
			}
			return nil, fmt.Errorf("%w\n(a running master holds %s: %s, or stop it first)", err, path, instead)
		}
		return nil, err
	}
	return inf, nil
}

// fromInfrastore decides where a read of the Infrastore is answered, for
// every verb that offers --db: with a file named, by that DuckDB file opened
// here read-only, and the master is not asked; else by the master, whose
// client the verb reads through.
func (a *app) fromInfrastore(ctx context.Context, db string, opts InfraOptions, here func(Infra) error, master func(*client) error) error {
	if db != "" {
		opts.ReadOnly = true
		inf, err := a.openInfra(ctx, "--db", db, opts)
		if err != nil {
			return err
		}
		defer inf.Close()
		return here(inf)
	}
	cl, err := a.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	return master(cl)
}
