package cli

import (
	"fmt"

	"github.com/corralhq/corral/commands/apipb"
	"github.com/spf13/cobra"
)

func (a *app) statusCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "show the master answering, who leads, and the cell in numbers",
		Args:  args(0, 0, "no arguments"),
		RunE: a.withClient(func(cmd *cobra.Command, cl *client, _ []string) error {
			s, err := readValue(cmd.Context(), cl, apipb.CellClient.Status, &apipb.StatusRequest{})
			if err != nil {
				return err
			}
			if a.output != "table" {
				return a.show(nil, s)
			}
			w := a.stdout()
			role := "follower"
			if s.Leader {
				role = "leader"
			}
			fmt.Fprintf(w, "master:    %s at %s (%s, epoch %d)\n", s.Master, cl.Current(), role, s.Epoch)
			fmt.Fprintf(w, "leader:    %s at %s\n", orDash(s.LeaderName), orDash(s.LeaderAddress))
			fmt.Fprintf(w, "log:       position %d applied of %d (%s)\n", s.Position, s.Head, s.Store)
			fmt.Fprintf(w, "machines:  %d\n", s.Machines)
			fmt.Fprintf(w, "jobs:      %d\n", s.Jobs)
			fmt.Fprintf(w, "tasks:     %d running, %d pending\n", s.TasksRunning, s.TasksPending)
			return nil
		}),
	}
}
