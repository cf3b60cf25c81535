package cli

import (
	"context"
	"fmt"

	"github.com/corralhq/corral/commands/apipb"
	"github.com/spf13/cobra"
	"google.golang.org/grpc"
)

func (a *app) allocCommand() *cobra.Command {
	c := &cobra.Command{Use: "alloc", Short: "remove alloc sets (create them with a bundle: see examples/alloc.jsonnet)"}
	var owner string
	rm := &cobra.Command{
		Use:   "remove NAME",
		Short: "remove an alloc set; the jobs running in it must be killed first",
		Args:  args(1, 1, "one alloc set name"),
		RunE: a.withClient(func(cmd *cobra.Command, cl *client, argv []string) error {
			rep, err := cl.mutate(cmd.Context(), func(ctx context.Context, c apipb.CellClient, id string, o ...grpc.CallOption) (*apipb.MutationReply, error) {
				return c.RemoveAllocSet(ctx, &apipb.JobRequest{RequestId: id, User: owner, Job: argv[0]}, o...)
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout(), "alloc set %s: %s\n", argv[0], rep.Message)
			return nil
		}),
	}
	rm.Flags().StringVar(&owner, "owner", "", "the alloc set's owner (default you)")
	c.AddCommand(rm)
	return c
}
