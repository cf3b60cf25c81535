package cli

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/corralhq/corral/commands/apipb"
)

func (a *app) stateDiffCommand() *cobra.Command {
	var from, to, owner string
	var limit int
	c := &cobra.Command{
		Use:   "diff --from TIME|POSITION [--to TIME|POSITION]",
		Short: "show what changed in the cell between two times or log positions",
		Long: `Lists what differs between the cell at two points of its log: jobs submitted,
whose spec changed (with the fields) or that ended; tasks started, moved,
restarted, failed, evicted or lost; machines added, removed, down, up or
drained; quotas and price sheets set. Both states are replayed from the log.`,
		Example: `  corral state diff --from 1h                      # the last hour
  corral state diff --from 2026-11-26T13:50:00Z --to 2026-11-26T14:10:00Z
  corral state diff --from 1200 --to 1500 --owner alice`,
		Args: args(0, 0, "no arguments (give --from, and --to unless now)"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if from == "" {
				return usageErr("--from: give a time (1h for an hour ago, RFC 3339) or a log position")
			}
			now := time.Now()
			req := &apipb.StateDiffRequest{User: owner, Limit: int32(limit)}
			if limit < 1 || limit > 100_000 {
				return usageErr("--limit: %d is outside 1-100000", limit)
			}
			var err error
			if req.FromPosition, req.FromTimeUs, err = parsePointUS(from, now); err != nil {
				return usageErr("--from: %v", err)
			}
			if to == "" {
				req.ToTimeUs = now.UnixMicro()
			} else if req.ToPosition, req.ToTimeUs, err = parsePointUS(to, now); err != nil {
				return usageErr("--to: %v", err)
			}
			cl, err := a.client()
			if err != nil {
				return err
			}
			defer cl.Close()
			v, err := readValue(cmd.Context(), cl, apipb.CellClient.StateDiff, req)
			if err != nil {
				return err
			}
			if a.output != "table" {
				return a.show(nil, v)
			}
			return writeStateDiff(a.stdout(), v)
		},
	}
	c.Flags().StringVar(&from, "from", "", "the earlier point: a time (RFC 3339; 1h for an hour ago) or a log position")
	c.Flags().StringVar(&to, "to", "", "the later point (default now)")
	c.Flags().StringVar(&owner, "owner", "", "only this user's jobs, tasks and quotas")
	c.Flags().IntVar(&limit, "limit", 1000, "most changes listed (the counts cover all)")
	return c
}

// writeStateDiff prints a state diff for people: the two points, the counts
// of each kind of change, then the changes.
func writeStateDiff(w io.Writer, v *apipb.StateDiffView) error {
	point := func(pos, us int64) string {
		if pos == 0 {
			return "the empty log"
		}
		return fmt.Sprintf("position %d (%s)", pos, timeText(us))
	}
	fmt.Fprintf(w, "the cell from %s to %s: %s\n", point(v.FromPosition, v.FromTimeUs), point(v.ToPosition, v.ToTimeUs), plural(int(v.Total), "change"))
	if v.Total == 0 {
		return nil
	}
	kinds := make([]string, 0, len(v.Counts))
	for k := range v.Counts {
		kinds = append(kinds, k)
	}
	slices.SortFunc(kinds, func(x, y string) int { return cmp.Or(cmp.Compare(v.Counts[y], v.Counts[x]), cmp.Compare(x, y)) })
	counts := make([]string, len(kinds))
	for i, k := range kinds {
		counts[i] = fmt.Sprintf("%s %d", k, v.Counts[k])
	}
	fmt.Fprintf(w, "%s\n\n", strings.Join(counts, ", "))
	t := &table{cols: []string{"KIND", "NAME", "CHANGE", "BEFORE", "AFTER"}}
	for _, ch := range v.Changes {
		t.add(ch.Kind, ch.Name, ch.What, ch.Before, ch.After)
	}
	if err := writeTable(w, t, "table"); err != nil {
		return err
	}
	if int(v.Total) > len(v.Changes) {
		fmt.Fprintf(w, "(%d of %d changes listed; --limit for more)\n", len(v.Changes), v.Total)
	}
	return nil
}
