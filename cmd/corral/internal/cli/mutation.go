package cli

import (
	"context"
	"fmt"

	"github.com/corralhq/corral/commands/apipb"
	"google.golang.org/grpc"
)

// mutation sends one mutation and prints what it did.
func (a *app) mutation(ctx context.Context, call func(ctx context.Context, c apipb.CellClient, id string, o ...grpc.CallOption) (*apipb.MutationReply, error), done string) error {
	cl, err := a.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	rep, err := cl.mutate(ctx, call)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout(), "%s at position %d\n", done, rep.FirstPosition)
	return nil
}
