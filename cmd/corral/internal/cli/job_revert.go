package cli

import (
	"context"
	"strconv"
	"time"

	"github.com/corralhq/corral/commands/apipb"
	"github.com/spf13/cobra"
	"google.golang.org/grpc"
)

func (a *app) jobRevertCommand() *cobra.Command {
	var owner string
	var wait bool
	var timeout time.Duration
	c := &cobra.Command{
		Use:               "revert NAME VERSION",
		Short:             "push an earlier spec version of a job again, as a new update (see `corral job history`)",
		Args:              args(2, 2, "a job name and a version"),
		ValidArgsFunction: a.completeJobs,
		RunE: func(cmd *cobra.Command, argv []string) error {
			version, err := strconv.ParseInt(argv[1], 10, 64)
			if err != nil || version <= 0 {
				return usageErr("VERSION %q: want a version number from `corral job history %s`", argv[1], argv[0])
			}
			cl, err := a.client()
			if err != nil {
				return err
			}
			defer cl.Close()
			return a.sendJobRequest(cmd.Context(), cl, owner, argv[0], wait, timeout, func(ctx context.Context, c apipb.CellClient, id string, o ...grpc.CallOption) (*apipb.MutationReply, error) {
				return c.Update(ctx, &apipb.UpdateRequest{RequestId: id, User: owner, Job: argv[0], RevertTo: version}, o...)
			})
		},
	}
	c.Flags().StringVar(&owner, "owner", "", "the job's owner (default you)")
	waitFlags(c, &wait, &timeout)
	return c
}
