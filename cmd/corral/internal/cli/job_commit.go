package cli

import (
	"context"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	"github.com/corralhq/corral/commands/apipb"
)

func (a *app) jobCommitCommand() *cobra.Command {
	return a.jobRequestCommand("commit NAME", "keep a job's update: it can no longer be rolled back", false,
		func(ctx context.Context, c apipb.CellClient, r *apipb.JobRequest, o ...grpc.CallOption) (*apipb.MutationReply, error) {
			return c.CommitUpdate(ctx, r, o...)
		})
}
