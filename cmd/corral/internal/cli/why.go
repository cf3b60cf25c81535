package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/corralhq/corral/commands/apipb"
	"github.com/spf13/cobra"
)

func (a *app) whyCommand() *cobra.Command {
	var owner, at string
	c := &cobra.Command{
		Use:   "why JOB [--at TIME|POSITION]",
		Short: "say why a job's tasks are pending (or were, at a past time)",
		Args:  args(1, 1, "one job name"),
		RunE: a.withClient(func(cmd *cobra.Command, cl *client, argv []string) error {
			req := &apipb.WhyPendingRequest{User: owner, Job: argv[0]}
			if at != "" {
				var err error
				if req.AtPosition, req.AtTimeUs, err = parsePointUS(at, time.Now()); err != nil {
					return usageErr("--at: %v", err)
				}
			}
			why, err := readValue(cmd.Context(), cl, apipb.CellClient.WhyPending, req)
			if err != nil {
				return err
			}
			if a.output != "table" {
				return a.show(nil, why)
			}
			writeWhy(a.stdout(), why)
			return nil
		}),
	}
	c.Flags().StringVar(&owner, "owner", "", "the job's owner (default you)")
	c.Flags().StringVar(&at, "at", "", "why they waited then: a time (RFC 3339; 1h for an hour ago) or a log position")
	return c
}

// writeWhy prints a why-pending explanation for people.
func writeWhy(w io.Writer, why *apipb.WhyPendingReply) {
	fmt.Fprintf(w, "%s/%s: %s\n", why.User, why.Job, why.Summary)
	if why.Spread != "" {
		fmt.Fprintf(w, "  %s\n", why.Spread)
	}
	for _, c := range why.Classes {
		if c.MachinesConsidered == 0 && len(c.Rejections) == 0 {
			// A reason recorded in the log (why --at): its words only.
			fmt.Fprintf(w, "  tasks %s: %s\n", indexRanges(c.TaskIndexes), c.Summary)
		} else {
			fmt.Fprintf(w, "  tasks %s: %d machines considered\n", indexRanges(c.TaskIndexes), c.MachinesConsidered)
		}
		for _, r := range c.Rejections {
			fmt.Fprintf(w, "    %d machine(s): %s\n", r.Machines, r.Reason)
		}
		for _, h := range c.Hints {
			fmt.Fprintf(w, "    hint: %s\n", h)
		}
	}
}

// indexRanges prints 0,1,2,5 as 0-2,5.
func indexRanges(idx []int32) string {
	if len(idx) == 0 {
		return "-"
	}
	var parts []string
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && idx[j+1] == idx[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d", idx[i], idx[j]))
		} else {
			parts = append(parts, strconv.Itoa(int(idx[i])))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}
