package cli

import (
	"context"
	"fmt"
	"strconv"

	"github.com/corralhq/corral/commands/apipb"
	"github.com/spf13/cobra"
	"google.golang.org/grpc"
)

func (a *app) machineCommand() *cobra.Command {
	c := &cobra.Command{Use: "machine", Short: "list machines, drain them for maintenance, retire them"}
	c.AddCommand(a.machineListCommand(),
		a.machineDrainCommand("drain MACHINE...", "stop placing tasks on machines and move their tasks elsewhere, within each job's disruption budget", true),
		a.machineDrainCommand("undrain MACHINE...", "let the scheduler place tasks on machines again", false),
		a.machineRemoveCommand())
	return c
}

func (a *app) machineListCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "list the cell's machines with what is placed on them",
		Args:    args(0, 0, "no arguments"),
		RunE: a.withClient(func(cmd *cobra.Command, cl *client, _ []string) error {
			l, err := readValue(cmd.Context(), cl, apipb.CellClient.ListMachines, &apipb.ListMachinesRequest{})
			if err != nil {
				return err
			}
			if len(l.Machines) == 0 && a.output == "table" {
				a.note("no machines have registered: start agents with `corral agent --master %s` (or use `corral up`)", a.masterAddr())
			}
			return a.show(machinesTable(l.Machines), protoList(l.Machines))
		}),
	}
}

func (a *app) machineRemoveCommand() *cobra.Command {
	var reason string
	remove := &cobra.Command{
		Use:   "remove MACHINE...",
		Short: "retire machines: their tasks go back to pending (stop their agents first, or they register again)",
		Args:  args(1, -1, "machine names"),
		RunE: a.withClient(func(cmd *cobra.Command, cl *client, argv []string) error {
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
		}),
	}
	remove.Flags().StringVar(&reason, "reason", "", "why, recorded in the log")
	return remove
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
