package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/corralhq/corral/cmd/corral/internal/jobfile"
	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/projections"
)

func (a *app) jobSubmitCommand() *cobra.Command {
	var wait, dryRun bool
	var secrets []string
	var timeout time.Duration
	c := &cobra.Command{
		Use:   "submit FILE",
		Short: "submit the job(s) of a Jsonnet, YAML or JSON file",
		Long: `Submit the job of FILE (.jsonnet, .yaml, .yml or .json), or every job of a
bundle after creating its alloc sets. With --wait, show the tasks' progress
until every task runs or has finished; a job that cannot be scheduled ends
the wait with the reason.

With --dry-run, submit nothing: show what the submission would do (the
events, then where the scheduler would place the tasks, or why they would
wait), made by the real command and scheduling pass on a copy of the cell,
as ` + "`corral job plan`" + ` does, and refused as the submission would be.`,
		Example: "  corral job submit examples/hello.jsonnet --wait\n  corral job submit examples/hello.jsonnet --dry-run\n  DB_PASSWORD=... corral job submit web.jsonnet --secret DB_PASSWORD",
		Args:    args(1, 1, "one job file"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			if dryRun && wait {
				return usageErr("--dry-run submits nothing to --wait for: give one of them")
			}
			cl, err := a.client()
			if err != nil {
				return err
			}
			defer cl.Close()
			ctx := cmd.Context()
			f, err := a.loadFileFor(ctx, cl, argv[0])
			if err != nil {
				return err
			}
			if dryRun {
				if len(f.AllocSets) > 0 {
					return usageErr("--dry-run: %s creates alloc sets (%s), which a dry run does not plan; create them first, or plan a file of jobs only", argv[0], f.AllocSets[0].Name)
				}
				return a.planFile(ctx, argv[0], secrets, 0, 0, true)
			}
			if err := a.addSecrets(f, secrets); err != nil {
				return err
			}
			last, err := a.createAllocSets(ctx, cl, f)
			if err != nil {
				return err
			}
			names, last, err := a.submitJobs(ctx, cl, argv[0], f, last)
			if err != nil {
				return err
			}
			if !wait {
				n := names[0]
				a.note("next: `corral job get %s`, `corral task list %s`, `corral why %s`", n, n, n)
				return nil
			}
			return a.waitJobs(ctx, cl, waitFor(names, 0), last, timeout)
		},
	}
	c.Flags().BoolVarP(&wait, "wait", "w", false, "wait until every task runs (and is healthy, when the job has a health check) or has finished; exit 1 when a task fails first")
	c.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "with --wait: give up after this long")
	c.Flags().BoolVar(&dryRun, "dry-run", false, "submit nothing: show what the submission would do, planned on a copy of the cell")
	c.Flags().StringArrayVar(&secrets, "secret", nil, "NAME: give the secret_env variable NAME the value of $NAME in your environment (repeat the flag); it is sealed, never logged")
	return c
}

// createAllocSets creates the alloc sets of f; one that exists is used as
// it is. It returns the log position of the last created.
func (a *app) createAllocSets(ctx context.Context, cl *client, f *jobfile.File) (int64, error) {
	var last int64
	for _, s := range f.AllocSets {
		rep, err := cl.mutate(ctx, func(ctx context.Context, c apipb.CellClient, id string, o ...grpc.CallOption) (*apipb.MutationReply, error) {
			return c.CreateAllocSet(ctx, &apipb.CreateAllocSetRequest{RequestId: id, Name: s.Name, Count: s.Count, Priority: s.Priority,
				Resources: s.Resources, Constraints: s.Constraints, Labels: s.Labels}, o...)
		})
		switch {
		case status.Code(err) == codes.AlreadyExists:
			a.note("alloc set %s/%s exists already; its jobs run in it as it is", cl.user, s.Name)
		case err != nil:
			return 0, fmt.Errorf("creating alloc set %s: %w", s.Name, err)
		default:
			last = max(last, rep.LastPosition)
			fmt.Fprintf(a.stdout(), "alloc set %s/%s created: %d allocs of %s (%s)\n", cl.user, s.Name, s.Count, resourcesText(s.Resources), rep.Message)
		}
	}
	return last, nil
}

// submitJobs submits the jobs of f, read from path, and returns their
// names and the log position of the last, or last if later.
func (a *app) submitJobs(ctx context.Context, cl *client, path string, f *jobfile.File, last int64) ([]string, int64, error) {
	var names []string
	for _, spec := range f.Jobs {
		rep, err := cl.mutate(ctx, func(ctx context.Context, c apipb.CellClient, id string, o ...grpc.CallOption) (*apipb.MutationReply, error) {
			return c.Submit(ctx, &apipb.SubmitRequest{RequestId: id, Spec: spec}, o...)
		})
		if err != nil {
			if status.Code(err) == codes.AlreadyExists {
				return nil, 0, fmt.Errorf("submitting %s: %s (`corral job update %s` changes it; `corral job kill %s` ends it)", spec.Name, status.Convert(err).Message(), path, spec.Name)
			}
			return nil, 0, fmt.Errorf("submitting %s: %w", spec.Name, err)
		}
		last = max(last, rep.LastPosition)
		names = append(names, spec.Name)
		fmt.Fprintf(a.stdout(), "job %s/%s submitted: %d task(s), priority %d (%s), %s\n", cl.user, spec.Name, spec.TaskCount, spec.Priority,
			projections.BandOf(spec.Priority), rep.Message)
	}
	return names, last, nil
}
