package cli

import (
	"context"

	"github.com/corralhq/corral/commands/apipb"
	"github.com/spf13/cobra"
	"google.golang.org/grpc"
)

func (a *app) jobRollbackCommand() *cobra.Command {
	return a.jobRequestCommand("rollback NAME", "undo a job's update: its tasks go back to the previous spec", false,
		func(ctx context.Context, c apipb.CellClient, r *apipb.JobRequest, o ...grpc.CallOption) (*apipb.MutationReply, error) {
			return c.RollbackUpdate(ctx, r, o...)
		})
}
