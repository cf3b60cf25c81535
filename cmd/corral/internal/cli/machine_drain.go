package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/corralhq/corral/commands/apipb"
	"github.com/spf13/cobra"
	"google.golang.org/grpc"
)

// drainFlags are the flags of `corral machine drain` and `undrain`.
type drainFlags struct {
	reason      string
	wait, force bool
	timeout     time.Duration
}

// machineDrainCommand is `corral machine drain` (draining) or `undrain`.
func (a *app) machineDrainCommand(use, short string, draining bool) *cobra.Command {
	var f drainFlags
	c := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  args(1, -1, "machine names"),
		RunE: a.withClient(func(cmd *cobra.Command, cl *client, argv []string) error {
			for _, m := range argv {
				if err := a.drainMachine(cmd.Context(), cl, m, draining, f); err != nil {
					return err
				}
			}
			return nil
		}),
	}
	c.Flags().StringVar(&f.reason, "reason", "", "why, recorded in the log")
	if draining {
		c.Flags().BoolVarP(&f.wait, "wait", "w", false, "show the drain's progress (tasks left, the jobs whose disruption budgets hold them) until the machine holds no task")
		c.Flags().DurationVar(&f.timeout, "timeout", 30*time.Minute, "with --wait: give up after this long")
		c.Flags().BoolVar(&f.force, "force", false, "emergencies: evict every task at once, below jobs' disruption budgets; says first which jobs it takes past their budget")
	}
	return c
}

// drainMachine drains machine m (or undrains it), forced with --force
// once it has said which budgets forcing breaks, and with --wait follows
// the drain to its end.
func (a *app) drainMachine(ctx context.Context, cl *client, m string, draining bool, f drainFlags) error {
	set := func(force bool) (*apipb.MutationReply, error) {
		rep, err := cl.mutate(ctx, func(ctx context.Context, c apipb.CellClient, id string, o ...grpc.CallOption) (*apipb.MutationReply, error) {
			return c.DrainMachine(ctx, &apipb.DrainMachineRequest{RequestId: id, Machine: m, Draining: draining, Reason: f.reason, Force: force}, o...)
		})
		if err != nil {
			return nil, fmt.Errorf("machine %s: %w", m, err)
		}
		return rep, nil
	}
	rep, err := set(false)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout(), "machine %s: %s\n", m, rep.Message)
	if f.force {
		// Say what forcing breaks before it does: the jobs whose budgets
		// hold tasks after the budgeted drain.
		if err := a.writeDrainHolds(ctx, cl, m, rep.LastPosition); err != nil {
			return err
		}
		if rep, err = set(true); err != nil {
			return err
		}
		fmt.Fprintf(a.stdout(), "machine %s: forced: %s\n", m, rep.Message)
	}
	if f.wait {
		return a.waitDrained(ctx, cl, m, rep.LastPosition, f.timeout)
	}
	return nil
}

// writeDrainHolds says which jobs' disruption budgets hold tasks on
// machine m, which forcing its drain takes past them.
func (a *app) writeDrainHolds(ctx context.Context, cl *client, m string, minPos int64) error {
	v, err := a.readMachine(ctx, cl, m, minPos)
	if err != nil {
		return err
	}
	if len(v.DrainHolds) == 0 {
		fmt.Fprintf(a.stdout(), "machine %s: --force breaks no disruption budget\n", m)
		return nil
	}
	fmt.Fprintf(a.stdout(), "machine %s: --force evicts %d task(s) now, taking these jobs past their disruption budget (update.max_disruptions):\n", m, v.Tasks)
	for _, h := range v.DrainHolds {
		fmt.Fprintf(a.stdout(), "  %s\n", h)
	}
	return nil
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
