package cli

import (
	"errors"
	"io"
	"math"
	"strings"

	"github.com/corralhq/corral/agent"
	"github.com/corralhq/corral/commands/apipb"
	"github.com/spf13/cobra"
)

func (a *app) taskLogsCommand() *cobra.Command {
	var owner string
	var stderr, follow, previous bool
	var tail, run int
	c := &cobra.Command{
		Use:   "logs JOB INDEX",
		Short: "print a task's stdout (or --stderr), streamed from its machine's agent",
		Long: `Print a task's stdout or stderr, read by the master from the agent of the
machine the task runs (or last ran) on: its current run, each run starting
with a "` + strings.TrimSpace(agent.RunMarker) + `..." line.

--previous prints the run before the latest, and --run N any run since the
job was submitted: N from 0, the task's first run, or negative back from
the latest (-1 is --previous). Each is read from the machine where that
run ran (the one it crashed on, or was drained or preempted from), while
that machine's agent keeps it: an agent keeps an ended task's sandbox for
its retention and a log's last window only. When the run's logs are gone
(its machine down or removed, or its agent no longer keeps them) the
command fails naming the run, the machine and why; an unknown N lists the
task's runs and where each ran. The task's owner or an admin only.`,
		Example:           "  corral task logs web 0 -f\n  corral task logs web/1 --stderr -n 50\n  corral task logs web 0 --previous\n  corral task logs web 0 --run 0",
		Args:              args(1, 2, "JOB INDEX or JOB/INDEX"),
		ValidArgsFunction: a.completeTask,
		RunE: func(cmd *cobra.Command, argv []string) error {
			job, index, err := taskArg(argv)
			if err != nil {
				return err
			}
			if tail < 0 || tail > math.MaxInt32 {
				return usageErr("--tail %d: want 0 (all) to %d lines", tail, math.MaxInt32)
			}
			runSet := cmd.Flags().Changed("run")
			switch {
			case previous && follow:
				return usageErr("--previous and --follow: a previous run writes no more")
			case previous && runSet:
				return usageErr("--previous and --run: give one (--previous is --run -1)")
			case runSet && (run < math.MinInt32 || run > math.MaxInt32):
				return usageErr("--run %d: want a run number from 0, or negative back from the latest", run)
			}
			cl, err := a.client()
			if err != nil {
				return err
			}
			defer cl.Close()
			req := &apipb.TaskLogsRequest{User: owner, Job: job, Index: index, Stderr: stderr, TailLines: int32(tail), Follow: follow, Previous: previous}
			if runSet {
				n := int32(run)
				req.Run = &n
			}
			ctx := cmd.Context()
			st, err := cl.Logs(ctx, req)
			if err != nil {
				return err
			}
			for {
				chunk, err := st.Recv()
				if errors.Is(err, io.EOF) || (err != nil && ctx.Err() != nil) {
					return nil
				}
				if err != nil {
					return err
				}
				if _, err := a.stdout().Write(chunk.Data); err != nil {
					return err
				}
			}
		},
	}
	c.Flags().StringVar(&owner, "owner", "", "the job's owner (default you)")
	c.Flags().BoolVar(&stderr, "stderr", false, "print stderr instead of stdout")
	c.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing what the task writes")
	c.Flags().BoolVar(&previous, "previous", false, "print the run before the latest, from the machine where it ran")
	c.Flags().IntVar(&run, "run", 0, "print run N since the job was submitted: 0 the first, negative back from the latest")
	c.Flags().IntVarP(&tail, "tail", "n", 0, "print only the last N lines")
	return c
}
