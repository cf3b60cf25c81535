package cli

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

func (a *app) jobHistoryCommand() *cobra.Command {
	var owner string
	var limit int
	c := &cobra.Command{
		Use:               "history NAME",
		Short:             "every spec version of a job: who changed it, when, how the update ended, and what changed",
		Args:              args(1, 1, "one job name"),
		ValidArgsFunction: a.completeJobs,
		Example:           "  corral job history web\n  corral job revert web 3",
		RunE: a.withClient(func(cmd *cobra.Command, cl *client, argv []string) error {
			h, err := readValue(cmd.Context(), cl, apipb.CellClient.JobHistory, &apipb.JobHistoryRequest{User: owner, Job: argv[0], Limit: int32(limit)})
			if err != nil {
				return err
			}
			if a.output != "table" {
				t := &table{cols: []string{"VERSION", "TIME", "ACTOR", "HOW", "RESTORES", "OUTCOME"}}
				for _, v := range h.Versions {
					t.add(strconv.FormatInt(v.Version, 10), time.UnixMicro(v.AtUs).UTC().Format(time.RFC3339), v.Actor, v.How, strconv.FormatInt(v.Restores, 10), v.Outcome)
				}
				return a.show(t, h)
			}
			writeHistory(a.stdout(), h)
			return nil
		}),
	}
	c.Flags().StringVar(&owner, "owner", "", "the job's owner (default you)")
	c.Flags().IntVar(&limit, "limit", 100, "the newest versions to show (at most 1000)")
	return c
}

// writeHistory prints each version with the fields it changed from the
// one before.
func writeHistory(w io.Writer, h *apipb.JobHistoryReply) {
	if n := int(h.Total) - len(h.Versions); n > 0 {
		fmt.Fprintf(w, "(%d older versions not shown)\n", n)
	}
	var prev *events.JobSpec
	for _, v := range h.Versions {
		mark := " "
		if v.Version == h.Current {
			mark = "*"
		}
		line := fmt.Sprintf("%s version %d  %s  %s  %s", mark, v.Version, time.UnixMicro(v.AtUs).Local().Format("2006-01-02 15:04:05"), v.Actor, v.How)
		if v.Restores != 0 {
			line += fmt.Sprintf(" to version %d's spec", v.Restores)
		}
		if v.Outcome != "" {
			line += " (" + v.Outcome + ")"
		}
		fmt.Fprintln(w, line)
		if prev != nil {
			for _, d := range projections.SpecChanges(prev, v.Spec) {
				fmt.Fprintf(w, "      %s\n", d)
			}
		}
		prev = v.Spec
	}
}
