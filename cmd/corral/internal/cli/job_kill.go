package cli

import (
	"context"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	"github.com/corralhq/corral/commands/apipb"
)

func (a *app) jobKillCommand() *cobra.Command {
	var selector, reason, user string
	c := &cobra.Command{
		Use:   "kill NAME... | --selector SEL",
		Short: "kill jobs by name or by label selector",
		Args:  args(0, -1, "job names, or --selector"),
		ValidArgsFunction: func(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			return a.jobNames(cmd, toComplete), cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, argv []string) error {
			if (len(argv) == 0) == (selector == "") {
				return usageErr("give job names or --selector, not both or neither")
			}
			cl, err := a.client()
			if err != nil {
				return err
			}
			defer cl.Close()
			reqs := []*apipb.KillRequest{}
			for _, n := range argv {
				reqs = append(reqs, &apipb.KillRequest{User: user, Job: n, Reason: reason})
			}
			if selector != "" {
				reqs = append(reqs, &apipb.KillRequest{User: user, Selector: selector, Reason: reason})
			}
			failed := false
			for _, r := range reqs {
				rep, err := cl.mutate(cmd.Context(), func(ctx context.Context, c apipb.CellClient, id string, o ...grpc.CallOption) (*apipb.MutationReply, error) {
					r.RequestId = id
					return c.Kill(ctx, r, o...)
				})
				what := r.Job
				if what == "" {
					what = "jobs matching " + strconv.Quote(r.Selector)
				}
				if err != nil {
					a.note("corral: killing %s: %s", what, a.describe(err))
					failed = true
					continue
				}
				fmt.Fprintf(a.stdout(), "killed %s: %s\n", what, rep.Message)
			}
			if failed {
				return &silentErr{code: ExitFailed}
			}
			return nil
		},
	}
	c.Flags().StringVarP(&selector, "selector", "l", "", "label selector, e.g. team=web,tier!=canary")
	c.Flags().StringVar(&reason, "reason", "", "why, recorded in the log")
	c.Flags().StringVar(&user, "owner", "", "the jobs' owner (default you; admins may name another)")
	return c
}

// jobListPage is the jobs `job list` asks for at a time (the master's
// most); a variable so that a test can page through a few.
var jobListPage = 1000
