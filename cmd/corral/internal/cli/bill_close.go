package cli

import (
	"context"
	"time"

	"github.com/corralhq/corral/commands/apipb"
	"github.com/spf13/cobra"
	"google.golang.org/grpc"
)

func (a *app) billCloseCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "close MONTH",
		Short: "close a billing period: its bill is then fixed; later usage of it is billed as a correction",
		Long: `Close the billing period MONTH (UTC, e.g. 2026-10) once it has ended. From
then on its bill is what the log held when it closed, whenever and wherever it
is computed; usage of the month recorded later (an agent that was partitioned)
appears in a later bill as Correction rows. Needs the admin capability.`,
		Example: `  corral bill close 2026-10`,
		Args:    args(1, 1, "a month, e.g. 2026-10"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			p, err := time.Parse("2006-01", argv[0])
			if err != nil {
				return usageErr("%q is not a month, e.g. 2026-10", argv[0])
			}
			return a.mutation(cmd.Context(), func(ctx context.Context, c apipb.CellClient, id string, o ...grpc.CallOption) (*apipb.MutationReply, error) {
				return c.CloseBillingPeriod(ctx, &apipb.CloseBillingPeriodRequest{RequestId: id, PeriodStartUs: p.UnixMicro()}, o...)
			}, "billing period "+argv[0]+" closed")
		},
	}
}
