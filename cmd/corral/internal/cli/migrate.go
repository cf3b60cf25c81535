package cli

import (
	"fmt"
	"strings"

	"github.com/corralhq/corral/events/storeopen"
	"github.com/spf13/cobra"
)

func (a *app) migrateCommand() *cobra.Command {
	var store string
	c := &cobra.Command{Use: "migrate", Short: "apply the event log's schema migrations"}
	up := &cobra.Command{
		Use:   "up",
		Short: "apply every migration not yet applied (masters do this when they start)",
		Args:  args(0, 0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if store == "" {
				store = a.getenv("CORRAL_STORE")
			}
			if store == "" {
				return usageErr("--store: give the event log: postgres://..., cockroachdb://... or a SQLite file (or set CORRAL_STORE)")
			}
			s, err := storeopen.Open(cmd.Context(), store, storeopen.Options{})
			if err != nil {
				return err
			}
			defer s.Close()
			head, err := s.Head(cmd.Context())
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout(), "%s: migrations applied; the log holds %d events\n", redactURL(store), head)
			return nil
		},
	}
	up.Flags().StringVar(&store, "store", "", "the event log: postgres://..., cockroachdb://... or a SQLite file (default $CORRAL_STORE)")
	c.AddCommand(up)
	return c
}

// redactURL hides a password in a store URL.
func redactURL(s string) string {
	i := strings.Index(s, "://")
	if i < 0 {
		return s
	}
	rest := s[i+3:]
	at := strings.Index(rest, "@")
	if at < 0 {
		return s
	}
	if c := strings.Index(rest[:at], ":"); c >= 0 {
		return s[:i+3] + rest[:c] + ":***" + rest[at:]
	}
	return s
}
