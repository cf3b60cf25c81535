package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	"github.com/corralhq/corral/cmd/corral/internal/jobfile"
	"github.com/corralhq/corral/commands/apipb"
)

func (a *app) jobUpdateCommand() *cobra.Command {
	var selector string
	var secrets []string
	var priority int
	var wait, dryRun bool
	var timeout time.Duration
	var ifPosition int64
	c := &cobra.Command{
		Use:   "update FILE | --selector SEL --priority N",
		Short: "change running jobs: a rolling update to the spec of FILE, or the priority of every job matching a selector",
		Long: `Update the jobs of FILE to their new spec. Changes that need a restart
(command, resources, constraints) replace tasks a few at a time, never more
than the job's update.max_disruptions disrupted at once: a replacement counts
until its health check passes (or it has run update.min_healthy_time). A
replacement that fails before it is healthy, or no progress by
update.progress_deadline, halts the update, and a service (restart always)
rolls back by itself; once every task runs the new version healthy the
update commits itself. By hand: ` + "`corral job commit`" + `, ` + "`corral job rollback`" + `,
` + "`corral job promote`" + ` (canaries). Changes that need no restart (count,
priority, labels, policies) take effect at once and leave no update open.
--dry-run says what the update would do (as ` + "`corral job plan`" + `); --wait shows
the roll and exits 1 with the reason when it halts or reverts.`,
		Args: args(0, 1, "a job file, or --selector"),
		RunE: a.withClient(func(cmd *cobra.Command, cl *client, argv []string) error {
			ctx := cmd.Context()
			if selector != "" {
				if len(argv) > 0 || !cmd.Flags().Changed("priority") {
					return usageErr("--selector updates only the priority: give --priority N and no file")
				}
				return a.updatePriority(ctx, cl, selector, int32(priority))
			}
			if len(argv) != 1 {
				return usageErr("give a job file, or --selector and --priority")
			}
			if dryRun {
				return a.planFile(ctx, argv[0], secrets, 0, 0, false)
			}
			f, err := a.loadFileFor(ctx, cl, argv[0])
			if err != nil {
				return err
			}
			if err := a.addSecrets(f, secrets); err != nil {
				return err
			}
			waits, last, err := a.updateJobs(ctx, cl, f, ifPosition)
			if err != nil {
				return err
			}
			if wait {
				if len(waits) == 0 {
					fmt.Fprintln(a.stdout(), "nothing changed: nothing to wait for")
					return nil
				}
				return a.waitJobs(ctx, cl, waits, last, timeout)
			}
			a.note("next: watch it with `corral job get %s` (or update with --wait); a rolling update commits itself once every task is healthy, or halts on a failure; `corral job rollback %s` undoes it meanwhile", f.Jobs[0].Name, f.Jobs[0].Name)
			return nil
		}),
	}
	c.Flags().StringVarP(&selector, "selector", "l", "", "label selector of the jobs to change, e.g. team=web,tier!=canary")
	c.Flags().IntVar(&priority, "priority", 0, "with --selector: the new priority (0-11)")
	c.Flags().BoolVar(&dryRun, "dry-run", false, "say what the update would do (as corral job plan does) and change nothing")
	c.Flags().Int64Var(&ifPosition, "if-position", 0, "refuse if the job changed after this log `POSITION` (the one corral job plan printed)")
	c.Flags().BoolVarP(&wait, "wait", "w", false, "show the roll's progress; exit 0 once every task runs the new version healthy (or canaries wait for a promote), 1 with the reason when the update halts or reverts")
	c.Flags().DurationVar(&timeout, "timeout", 10*time.Minute, "with --wait: give up after this long")
	c.Flags().StringArrayVar(&secrets, "secret", nil, "NAME: a new value for the secret_env variable NAME from $NAME in your environment (repeat the flag); secrets not given keep their values")
	return c
}

// updatePriority sets the priority of every job selector matches.
func (a *app) updatePriority(ctx context.Context, cl *client, selector string, priority int32) error {
	rep, err := cl.mutate(ctx, func(ctx context.Context, c apipb.CellClient, id string, o ...grpc.CallOption) (*apipb.MutationReply, error) {
		return c.Update(ctx, &apipb.UpdateRequest{RequestId: id, Selector: selector, Priority: priority}, o...)
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout(), "jobs matching %q: %s\n", selector, rep.Message)
	return nil
}

// updateJobs updates each job of f to its spec, refused when the job
// changed after ifPosition (0: whenever). It returns the updates that
// roll, to wait for, and the log position of the last.
func (a *app) updateJobs(ctx context.Context, cl *client, f *jobfile.File, ifPosition int64) ([]*waited, int64, error) {
	var waits []*waited
	var last int64
	for _, spec := range f.Jobs {
		rep, err := cl.mutate(ctx, func(ctx context.Context, c apipb.CellClient, id string, o ...grpc.CallOption) (*apipb.MutationReply, error) {
			return c.Update(ctx, &apipb.UpdateRequest{RequestId: id, Spec: spec, IfPosition: ifPosition}, o...)
		})
		if err != nil {
			return nil, 0, fmt.Errorf("updating %s: %w", spec.Name, err)
		}
		fmt.Fprintf(a.stdout(), "job %s/%s updated: %s\n", cl.user, spec.Name, rep.Message)
		if rep.SpecVersion != 0 {
			waits = append(waits, &waited{name: spec.Name, version: rep.SpecVersion})
			last = max(last, rep.LastPosition)
		}
	}
	return waits, last, nil
}
