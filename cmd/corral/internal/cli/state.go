package cli

import (
	"fmt"
	"strconv"
	"time"

	"github.com/corralhq/corral/commands/apipb"
	"github.com/spf13/cobra"
)

func (a *app) stateCommand() *cobra.Command {
	var at, owner string
	c := &cobra.Command{
		Use:   "state --at TIME|POSITION",
		Short: "show the cell as it was at a past time or log position",
		Example: `  corral state --at 5m        # five minutes ago
  corral state --at 2025-06-01T12:00:00Z
  corral state --at 1200      # after the log's event 1200`,
		Args: args(0, 0, "no arguments (give --at)"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if at == "" {
				return usageErr("--at: give a time (5m for five minutes ago, RFC 3339) or a log position")
			}
			pos, t, err := parsePoint(at, time.Now())
			if err != nil {
				return usageErr("--at: %v", err)
			}
			cl, err := a.client()
			if err != nil {
				return err
			}
			defer cl.Close()
			req := &apipb.StateAtRequest{Position: pos, User: owner}
			if pos == 0 {
				req.TimeUs = t.UnixMicro()
			}
			v, err := readValue(cmd.Context(), cl, apipb.CellClient.StateAt, req)
			if err != nil {
				return err
			}
			if a.output != "table" {
				return a.show(nil, v)
			}
			w := a.stdout()
			asked := at
			if pos == 0 {
				asked = t.Local().Format("2006-01-02 15:04:05")
			}
			if v.Position == 0 {
				fmt.Fprintf(w, "the cell at %s: before its first event; nothing had happened yet\n", asked)
				return nil
			}
			fmt.Fprintf(w, "the cell at %s: log position %d (last event at %s)\n", asked, v.Position, timeText(v.TimeUs))
			fmt.Fprintf(w, "%s, %s; tasks: %d pending, %d running, %d dead\n\n", plural(len(v.Machines), "machine"), plural(len(v.Jobs), "job"), v.TasksPending, v.TasksRunning, v.TasksDead)
			if len(v.Machines) > 0 {
				if err := writeTable(w, machinesTable(v.Machines), "table"); err != nil {
					return err
				}
				fmt.Fprintln(w)
			}
			jt := &table{cols: []string{"JOB", "STATE", "PRIORITY", "RUNNING", "PENDING", "DEAD", "TASKS"}}
			for _, j := range v.Jobs {
				jt.add(j.Spec.GetUser()+"/"+j.Spec.GetName(), j.State, strconv.Itoa(int(j.Spec.GetPriority())), strconv.Itoa(int(j.Running+j.Scheduled)),
					strconv.Itoa(int(j.Pending)), strconv.Itoa(int(j.Dead)), strconv.Itoa(int(j.TotalTasks)))
			}
			if len(v.Jobs) == 0 {
				fmt.Fprintln(w, "no jobs then")
				return nil
			}
			return writeTable(w, jt, "table")
		},
	}
	c.Flags().StringVar(&at, "at", "", "a time (RFC 3339; 5m or -5m for five minutes ago; today) or a log position")
	c.Flags().StringVar(&owner, "owner", "", "show only this user's jobs")
	c.AddCommand(a.stateDiffCommand())
	return c
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}
