package cli

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/corralhq/corral/commands/apipb"
	"github.com/spf13/cobra"
	"google.golang.org/grpc"
)

func (a *app) machineCommand() *cobra.Command {
	c := &cobra.Command{Use: "machine", Short: "list machines, drain them for maintenance, retire them"}
	list := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "list the cell's machines with what is placed on them",
		Args:    args(0, 0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := a.client()
			if err != nil {
				return err
			}
			defer cl.Close()
			l, err := readValue(cmd.Context(), cl, apipb.CellClient.ListMachines, &apipb.ListMachinesRequest{})
			if err != nil {
				return err
			}
			if len(l.Machines) == 0 && a.output == "table" {
				a.note("no machines have registered: start agents with `corral agent --master %s` (or use `corral up`)", a.masterAddr())
			}
			return a.show(machinesTable(l.Machines), protoList(l.Machines))
		},
	}
	drain := func(use, short string, draining bool) *cobra.Command {
		var (
			reason      string
			wait, force bool
			timeout     time.Duration
		)
		c := &cobra.Command{
			Use:   use,
			Short: short,
			Args:  args(1, -1, "machine names"),
			RunE: func(cmd *cobra.Command, argv []string) error {
				cl, err := a.client()
				if err != nil {
					return err
				}
				defer cl.Close()
				set := func(m string, force bool) (*apipb.MutationReply, error) {
					rep, err := cl.mutate(cmd.Context(), func(ctx context.Context, c apipb.CellClient, id string, o ...grpc.CallOption) (*apipb.MutationReply, error) {
						return c.DrainMachine(ctx, &apipb.DrainMachineRequest{RequestId: id, Machine: m, Draining: draining, Reason: reason, Force: force}, o...)
					})
					if err != nil {
						return nil, fmt.Errorf("machine %s: %w", m, err)
					}
					return rep, nil
				}
				for _, m := range argv {
					rep, err := set(m, false)
					if err != nil {
						return err
					}
					fmt.Fprintf(a.stdout(), "machine %s: %s\n", m, rep.Message)
					if force {
						// Say what forcing breaks before it does: the jobs
						// whose budgets hold tasks after the budgeted drain.
						v, err := a.readMachine(cmd.Context(), cl, m, rep.LastPosition)
						if err != nil {
							return err
						}
						if len(v.DrainHolds) == 0 {
							fmt.Fprintf(a.stdout(), "machine %s: --force breaks no disruption budget\n", m)
						} else {
							fmt.Fprintf(a.stdout(), "machine %s: --force evicts %d task(s) now, taking these jobs past their disruption budget (update.max_disruptions):\n", m, v.Tasks)
							for _, h := range v.DrainHolds {
								fmt.Fprintf(a.stdout(), "  %s\n", h)
							}
						}
						rep, err = set(m, true)
						if err != nil {
							return err
						}
						fmt.Fprintf(a.stdout(), "machine %s: forced: %s\n", m, rep.Message)
					}
					if wait {
						if err := a.waitDrained(cmd.Context(), cl, m, rep.LastPosition, timeout); err != nil {
							return err
						}
					}
				}
				return nil
			},
		}
		c.Flags().StringVar(&reason, "reason", "", "why, recorded in the log")
		if draining {
			c.Flags().BoolVarP(&wait, "wait", "w", false, "show the drain's progress (tasks left, the jobs whose disruption budgets hold them) until the machine holds no task")
			c.Flags().DurationVar(&timeout, "timeout", 30*time.Minute, "with --wait: give up after this long")
			c.Flags().BoolVar(&force, "force", false, "emergencies: evict every task at once, below jobs' disruption budgets; says first which jobs it takes past their budget")
		}
		return c
	}
	var reason string
	remove := &cobra.Command{
		Use:   "remove MACHINE...",
		Short: "retire machines: their tasks go back to pending (stop their agents first, or they register again)",
		Args:  args(1, -1, "machine names"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			cl, err := a.client()
			if err != nil {
				return err
			}
			defer cl.Close()
			for _, m := range argv {
				rep, err := cl.mutate(cmd.Context(), func(ctx context.Context, c apipb.CellClient, id string, o ...grpc.CallOption) (*apipb.MutationReply, error) {
					return c.RemoveMachine(ctx, &apipb.RemoveMachineRequest{RequestId: id, Machine: m, Reason: reason}, o...)
				})
				if err != nil {
					return fmt.Errorf("machine %s: %w", m, err)
				}
				fmt.Fprintf(a.stdout(), "machine %s removed: %s\n", m, rep.Message)
			}
			return nil
		},
	}
	remove.Flags().StringVar(&reason, "reason", "", "why, recorded in the log")
	c.AddCommand(list,
		drain("drain MACHINE...", "stop placing tasks on machines and move their tasks elsewhere, within each job's disruption budget", true),
		drain("undrain MACHINE...", "let the scheduler place tasks on machines again", false),
		remove)
	return c
}

func machinesTable(ms []*apipb.MachineView) *table {
	t := &table{cols: []string{"MACHINE", "STATE", "ADDRESS", "TASKS", "CPU (RESERVED/CAPACITY)", "MEMORY (RESERVED/CAPACITY)", "CPU USED", "MEMORY USED", "ATTRIBUTES"}}
	for _, m := range ms {
		state := m.State
		if m.Draining {
			state += ", draining"
			if m.Tasks > 0 {
				state += fmt.Sprintf(", %d tasks left", m.Tasks)
			}
		}
		if m.Reason != "" {
			state += " (" + m.Reason + ")"
		}
		t.add(m.Name, state, m.Address, strconv.Itoa(int(m.Tasks)),
			cores(m.Reserved.GetCpuMilli())+"/"+cores(m.Capacity.GetCpuMilli()),
			bytesHuman(m.Reserved.GetMemoryBytes())+"/"+bytesHuman(m.Capacity.GetMemoryBytes()),
			strconv.FormatFloat(m.CpuCoresUsed, 'f', 2, 64), bytesHuman(m.MemoryBytesUsed), labelsText(m.Attributes))
	}
	return t
}

// readMachine reads one machine's view at or after position minPos.
func (a *app) readMachine(ctx context.Context, cl *client, name string, minPos int64) (*apipb.MachineView, error) {
	l, err := readValue(ctx, cl, apipb.CellClient.ListMachines, &apipb.ListMachinesRequest{Read: &apipb.ReadOptions{MinPosition: minPos}})
	if err != nil {
		return nil, err
	}
	for _, m := range l.Machines {
		if m.Name == name {
			return m, nil
		}
	}
	return nil, fmt.Errorf("machine %s: not registered", name)
}

// waitDrained shows a drain's progress, a line each time it changes (tasks
// left, the jobs whose disruption budgets hold them), until the machine
// holds no task; it fails when the machine stops draining or after
// timeout.
func (a *app) waitDrained(ctx context.Context, cl *client, name string, minPos int64, timeout time.Duration) error {
	start := time.Now()
	last := ""
	for {
		v, err := a.readMachine(ctx, cl, name, minPos)
		if err != nil {
			return err
		}
		elapsed := time.Since(start).Truncate(100 * time.Millisecond)
		if !v.Draining {
			fmt.Fprintf(a.stdout(), "machine %s: no longer draining, %d tasks left (%s)\n", name, v.Tasks, elapsed)
			return &silentErr{code: ExitFailed}
		}
		if v.Tasks == 0 {
			fmt.Fprintf(a.stdout(), "machine %s: drained, no task left (%s)\n", name, elapsed)
			return nil
		}
		line := fmt.Sprintf("machine %s: draining, %d tasks left", name, v.Tasks)
		if len(v.DrainHolds) > 0 {
			line += "; held by " + strings.Join(v.DrainHolds, "; ")
		} else {
			line += "; being replaced"
		}
		if line != last {
			fmt.Fprintf(a.stderr(), "%s (%s)\n", line, elapsed)
			last = line
		}
		if time.Since(start) > timeout {
			fmt.Fprintf(a.stdout(), "timed out after %s: %s\n", elapsed, line)
			return &silentErr{code: ExitFailed}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}
