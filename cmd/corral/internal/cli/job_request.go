package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/corralhq/corral/commands/apipb"
	"github.com/spf13/cobra"
	"google.golang.org/grpc"
)

// jobRequestCommand is a verb that sends one JobRequest; with rolls, it
// has --wait, which follows the roll it sets going as update --wait does.
func (a *app) jobRequestCommand(use, short string, rolls bool, call func(context.Context, apipb.CellClient, *apipb.JobRequest, ...grpc.CallOption) (*apipb.MutationReply, error)) *cobra.Command {
	var owner string
	var wait bool
	var timeout time.Duration
	c := &cobra.Command{
		Use:               use,
		Short:             short,
		Args:              args(1, 1, "one job name"),
		ValidArgsFunction: a.completeJobs,
		RunE: a.withClient(func(cmd *cobra.Command, cl *client, argv []string) error {
			return a.sendJobRequest(cmd.Context(), cl, owner, argv[0], wait, timeout, func(ctx context.Context, c apipb.CellClient, id string, o ...grpc.CallOption) (*apipb.MutationReply, error) {
				return call(ctx, c, &apipb.JobRequest{RequestId: id, User: owner, Job: argv[0]}, o...)
			})
		}),
	}
	c.Flags().StringVar(&owner, "owner", "", "the job's owner (default you)")
	if rolls {
		waitFlags(c, &wait, &timeout)
	}
	return c
}

// sendJobRequest sends a mutation of owner's job, says the master's
// answer, and with wait follows the roll it sets going.
func (a *app) sendJobRequest(ctx context.Context, cl *client, owner, job string, wait bool, timeout time.Duration,
	call func(ctx context.Context, c apipb.CellClient, id string, o ...grpc.CallOption) (*apipb.MutationReply, error)) error {
	rep, err := cl.mutate(ctx, call)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout(), "%s: %s\n", job, rep.Message)
	if wait {
		return a.waitRoll(ctx, cl, owner, job, rep, timeout)
	}
	return nil
}

// waitFlags adds --wait and --timeout to a verb that sets a roll going.
func waitFlags(c *cobra.Command, wait *bool, timeout *time.Duration) {
	c.Flags().BoolVarP(wait, "wait", "w", false, "show the roll's progress; exit 0 once every task runs the new version healthy, 1 with the reason when the update halts or reverts")
	c.Flags().DurationVar(timeout, "timeout", 2*time.Minute, "with --wait: give up after this long")
}

// waitRoll follows the roll to the spec version rep made (or promoted),
// as update --wait does.
func (a *app) waitRoll(ctx context.Context, cl *client, owner, job string, rep *apipb.MutationReply, timeout time.Duration) error {
	if rep.GetSpecVersion() == 0 {
		fmt.Fprintln(a.stdout(), "nothing changed: nothing to wait for")
		return nil
	}
	return a.waitJobs(ctx, cl, []*waited{{name: job, owner: owner, version: rep.GetSpecVersion()}}, rep.GetLastPosition(), timeout)
}
