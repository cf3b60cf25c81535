package cli

import (
	"context"
	"fmt"

	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/projections"
	"github.com/spf13/cobra"
	"google.golang.org/grpc"
)

func (a *app) quotaCommand() *cobra.Command {
	c := &cobra.Command{Use: "quota", Short: "show and set users' quota per priority band"}
	get := &cobra.Command{
		Use:   "get [USER]",
		Short: "show quota granted and in use (default: yours; --all: everyone's)",
		Args:  args(0, 1, "at most one user"),
	}
	var all bool
	get.Flags().BoolVarP(&all, "all", "A", false, "every user's quota")
	get.RunE = func(cmd *cobra.Command, argv []string) error {
		cl, err := a.client()
		if err != nil {
			return err
		}
		defer cl.Close()
		user, err := cl.me(cmd.Context())
		if err != nil {
			return err
		}
		if len(argv) == 1 {
			user = argv[0]
		}
		if all {
			user = ""
		}
		l, err := readValue(cmd.Context(), cl, apipb.CellClient.GetQuota, &apipb.GetQuotaRequest{User: user})
		if err != nil {
			return err
		}
		t := &table{cols: []string{"USER", "BAND", "GRANTED", "IN USE"}}
		for _, q := range l.Quotas {
			granted := resourcesText(q.Granted)
			if q.Unlimited {
				granted = "unlimited"
			}
			t.add(q.User, q.Band, granted, resourcesText(q.InUse))
		}
		if len(l.Quotas) == 0 && a.output == "table" {
			a.note("no quota granted%s; best-effort jobs need none. An admin grants quota with `corral quota set USER BAND --cpu N --memory SIZE`", forWhom(user))
		}
		return a.show(t, protoList(l.Quotas))
	}
	var rf resourceFlags
	var ports int32
	set := &cobra.Command{
		Use:     "set USER BAND",
		Short:   "grant a user quota in a band (admins only)",
		Example: "  corral quota set alice production --cpu 8 --memory 32GiB",
		Args:    args(2, 2, "USER and BAND (monitoring, production, batch)"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			if _, ok := projections.ParseBand(argv[1]); !ok {
				return usageErr("band %q: want monitoring, production, batch or best-effort", argv[1])
			}
			res, err := rf.resources(ports)
			if err != nil {
				return err
			}
			cl, err := a.client()
			if err != nil {
				return err
			}
			defer cl.Close()
			rep, err := cl.mutate(cmd.Context(), func(ctx context.Context, c apipb.CellClient, id string, o ...grpc.CallOption) (*apipb.MutationReply, error) {
				return c.SetQuota(ctx, &apipb.SetQuotaRequest{RequestId: id, User: argv[0], Band: argv[1], Resources: res}, o...)
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout(), "quota of %s in %s set to %s: %s\n", argv[0], argv[1], resourcesText(res), rep.Message)
			return nil
		},
	}
	rf.add(set, "granted")
	set.Flags().Int32Var(&ports, "ports", 0, "granted ports")
	c.AddCommand(get, set)
	return c
}
