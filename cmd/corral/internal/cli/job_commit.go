package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	"github.com/corralhq/corral/commands/apipb"
)

func (a *app) jobCommitCommand() *cobra.Command {
	return a.jobRequestCommand("commit NAME", "keep a job's update: it can no longer be rolled back",
		func(ctx context.Context, c apipb.CellClient, r *apipb.JobRequest, o ...grpc.CallOption) (*apipb.MutationReply, error) {
			return c.CommitUpdate(ctx, r, o...)
		})
}

func (a *app) jobRollbackCommand() *cobra.Command {
	return a.jobRequestCommand("rollback NAME", "undo a job's update: its tasks go back to the previous spec",
		func(ctx context.Context, c apipb.CellClient, r *apipb.JobRequest, o ...grpc.CallOption) (*apipb.MutationReply, error) {
			return c.RollbackUpdate(ctx, r, o...)
		})
}

func (a *app) jobPromoteCommand() *cobra.Command {
	return a.jobRequestCommand("promote NAME", "promote an update's canaries: the rest of the tasks roll",
		func(ctx context.Context, c apipb.CellClient, r *apipb.JobRequest, o ...grpc.CallOption) (*apipb.MutationReply, error) {
			return c.PromoteUpdate(ctx, r, o...)
		})
}

func (a *app) jobRequestCommand(use, short string, call func(context.Context, apipb.CellClient, *apipb.JobRequest, ...grpc.CallOption) (*apipb.MutationReply, error)) *cobra.Command {
	var owner string
	c := &cobra.Command{
		Use:               use,
		Short:             short,
		Args:              args(1, 1, "one job name"),
		ValidArgsFunction: a.completeJobs,
		RunE: func(cmd *cobra.Command, argv []string) error {
			cl, err := a.client()
			if err != nil {
				return err
			}
			defer cl.Close()
			rep, err := cl.mutate(cmd.Context(), func(ctx context.Context, c apipb.CellClient, id string, o ...grpc.CallOption) (*apipb.MutationReply, error) {
				return call(ctx, c, &apipb.JobRequest{RequestId: id, User: owner, Job: argv[0]}, o...)
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout(), "%s: %s\n", argv[0], rep.Message)
			return nil
		},
	}
	c.Flags().StringVar(&owner, "owner", "", "the job's owner (default you)")
	return c
}
