package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

// whoamiCommand is `corral whoami`: whom the master takes the caller to be,
// the same answer every verb acts on (client.me).
func (a *app) whoamiCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "whoami",
		Short: "show whom the master takes you to be: your user, role and credentials",
		Long: `Show whom the master takes you to be. With a certificate or token that is
the name in it, whatever --user or $CORRAL_USER say; every verb that means
"my jobs" (job list, task list, quota get) uses this name. A master run
with --insecure checks no credentials and trusts the name sent
(--user, $CORRAL_USER, $USER).`,
		Args: args(0, 0, "no arguments"),
		RunE: a.withClient(func(cmd *cobra.Command, cl *client, _ []string) error {
			who, err := cl.whoAmI(cmd.Context())
			if err != nil {
				return err
			}
			if a.output != "table" {
				return a.show(nil, who)
			}
			how := "by " + who.GetVia()
			if who.GetVia() == "header" {
				how = "by name only: this master checks no credentials"
			}
			fmt.Fprintf(a.stdout(), "%s (%s, %s)\n", who.GetUser(), who.GetRole(), how)
			return nil
		}),
	}
}
