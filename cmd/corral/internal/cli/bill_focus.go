package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/corralhq/corral/commands/apipb"
)

// focusFlags are `corral bill`'s FOCUS options.
type focusFlags struct {
	granularity, accountBy, idle, explain string
	// user is --user: only that user's costs (commands.CostsScope).
	user string
	// cell is --cell or $CORRAL_CELL, with --db only: the file records its
	// cell's name, which this must match (or name, for a file that records
	// none), so that every export of a cell names it alike.
	cell string
}

// exportFocus streams a FOCUS export (or one row's explanation) from the
// master's Infrastore, or from a file with --db, to --out or stdout.
func (a *app) exportFocus(ctx context.Context, from, to time.Time, format, out, db string, f focusFlags) error {
	// Charge periods are hours: widen the period to whole hours.
	from = from.UTC().Truncate(time.Hour)
	if t := to.UTC().Truncate(time.Hour); t.Before(to) {
		to = t.Add(time.Hour)
	}
	if format == "focus-parquet" && out == "" && isTerminal(a.stdout()) && f.explain == "" {
		return usageErr("parquet is binary: give --out FILE")
	}
	req := &apipb.BillRequest{FromUs: from.UnixMicro(), ToUs: to.UnixMicro(), Format: format, Granularity: f.granularity,
		AccountBy: f.accountBy, Idle: f.idle, Explain: f.explain, User: f.user}
	if f.explain != "" {
		req.Format = "focus"
	}
	var w io.Writer = a.stdout()
	var file *os.File
	if out != "" {
		var err error
		if file, err = os.Create(out); err != nil {
			return err
		}
		defer file.Close()
		w = file
	}
	n := int64(0)
	send := func(b []byte) error {
		n += int64(len(b))
		_, err := w.Write(b)
		return err
	}
	err := a.fromInfrastore(ctx, db, InfraOptions{Cell: f.cell}, func(inf Infra) error {
		err := inf.ExportBill(ctx, req, send)
		if err != nil && f.cell != "" && strings.Contains(err.Error(), "cell:") {
			return fmt.Errorf("--cell (or $CORRAL_CELL) %q: %w", f.cell, err)
		}
		return err
	}, func(cl *client) error {
		return cl.read(ctx, func(ctx context.Context, c apipb.CellClient) error {
			if n > 0 {
				// Part of the export went out: a retry would repeat it.
				return fmt.Errorf("the export broke off after %d bytes; run it again", n)
			}
			stream, err := c.ExportBill(ctx, req)
			if err != nil {
				return err
			}
			for {
				chunk, err := stream.Recv()
				if err == io.EOF {
					return nil
				}
				if err != nil {
					return err
				}
				if err := send(chunk.Data); err != nil {
					return err
				}
			}
		})
	})
	if err != nil {
		return err
	}
	if file != nil {
		if err := file.Close(); err != nil {
			return err
		}
		fmt.Fprintf(a.stderr(), "FOCUS export of %s to %s written to %s (%d bytes)\n", from.Format(time.RFC3339), to.Format(time.RFC3339), out, n)
	}
	return nil
}
