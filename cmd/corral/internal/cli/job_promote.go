package cli

import (
	"context"

	"github.com/corralhq/corral/commands/apipb"
	"github.com/spf13/cobra"
	"google.golang.org/grpc"
)

func (a *app) jobPromoteCommand() *cobra.Command {
	return a.jobRequestCommand("promote NAME", "promote an update's canaries: the rest of the tasks roll", true,
		func(ctx context.Context, c apipb.CellClient, r *apipb.JobRequest, o ...grpc.CallOption) (*apipb.MutationReply, error) {
			return c.PromoteUpdate(ctx, r, o...)
		})
}
