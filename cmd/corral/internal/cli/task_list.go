package cli

import (
	"fmt"
	"time"

	"github.com/corralhq/corral/commands/apipb"
	"github.com/spf13/cobra"
)

func (a *app) taskListCommand() *cobra.Command {
	var selector, state, machine, owner string
	var all bool
	c := &cobra.Command{
		Use:     "list [JOB]",
		Aliases: []string{"ls"},
		Short:   "list the tasks of a job, of a machine, or of every job of yours",
		Args:    args(0, 1, "at most one job name"),
		RunE: a.withClient(func(cmd *cobra.Command, cl *client, argv []string) error {
			me, err := cl.me(cmd.Context())
			if err != nil {
				return err
			}
			req := &apipb.ListTasksRequest{User: me, Selector: selector, State: state, Machine: machine}
			if owner != "" {
				req.User = owner
			}
			if all {
				req.User = ""
			}
			if len(argv) == 1 {
				req.Job = argv[0]
			}
			l, err := readValue(cmd.Context(), cl, apipb.CellClient.ListTasks, req)
			if err != nil {
				return err
			}
			if len(l.Tasks) == 0 && a.output == "table" {
				a.note("no tasks match")
			}
			t := tasksTable(l.Tasks, time.Now())
			if req.Job == "" {
				for i, x := range l.Tasks {
					t.rows[i][0] = fmt.Sprintf("%s/%s/%d", x.User, x.Job, x.Index)
				}
			}
			return a.show(t, protoList(l.Tasks))
		}),
	}
	c.Flags().StringVarP(&selector, "selector", "l", "", "label selector of the jobs, e.g. team=web")
	c.Flags().StringVar(&state, "state", "", "only tasks in this state: pending, scheduled, running, stopping (killed or evicted, the process not gone yet), dead, or how they died (finished, failed, killed, evicted, lost)")
	c.Flags().StringVar(&machine, "machine", "", "the tasks on this machine")
	c.Flags().StringVar(&owner, "owner", "", "another user's tasks")
	c.Flags().BoolVarP(&all, "all", "A", false, "every user's tasks")
	return c
}
