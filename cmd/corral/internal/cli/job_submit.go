package cli

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/projections"
)

func (a *app) jobSubmitCommand() *cobra.Command {
	var wait bool
	var secrets []string
	var timeout time.Duration
	c := &cobra.Command{
		Use:   "submit FILE",
		Short: "submit the job(s) of a Jsonnet, YAML or JSON file",
		Long: `Submit the job of FILE (.jsonnet, .yaml, .yml or .json), or every job of a
bundle after creating its alloc sets. With --wait, show the tasks' progress
until every task runs or has finished; a job that cannot be scheduled ends
the wait with the reason.`,
		Example: "  corral job submit examples/hello.jsonnet --wait\n  DB_PASSWORD=... corral job submit web.jsonnet --secret DB_PASSWORD",
		Args:    args(1, 1, "one job file"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			f, err := a.loadFile(argv[0])
			if err != nil {
				return err
			}
			if err := a.addSecrets(f, secrets); err != nil {
				return err
			}
			cl, err := a.client()
			if err != nil {
				return err
			}
			defer cl.Close()
			ctx := cmd.Context()
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
					return fmt.Errorf("creating alloc set %s: %w", s.Name, err)
				default:
					last = max(last, rep.LastPosition)
					fmt.Fprintf(a.stdout(), "alloc set %s/%s created: %d allocs of %s (%s)\n", cl.user, s.Name, s.Count, resourcesText(s.Resources), rep.Message)
				}
			}
			var names []string
			for _, spec := range f.Jobs {
				rep, err := cl.mutate(ctx, func(ctx context.Context, c apipb.CellClient, id string, o ...grpc.CallOption) (*apipb.MutationReply, error) {
					return c.Submit(ctx, &apipb.SubmitRequest{RequestId: id, Spec: spec}, o...)
				})
				if err != nil {
					if status.Code(err) == codes.AlreadyExists {
						return fmt.Errorf("submitting %s: %s (`corral job update %s` changes it; `corral job kill %s` ends it)", spec.Name, status.Convert(err).Message(), argv[0], spec.Name)
					}
					return fmt.Errorf("submitting %s: %w", spec.Name, err)
				}
				last = max(last, rep.LastPosition)
				names = append(names, spec.Name)
				fmt.Fprintf(a.stdout(), "job %s/%s submitted: %d task(s), priority %d (%s), %s\n", cl.user, spec.Name, spec.TaskCount, spec.Priority,
					projections.BandOf(spec.Priority), rep.Message)
			}
			if !wait {
				n := names[0]
				a.note("next: `corral job get %s`, `corral task list %s`, `corral why %s`", n, n, n)
				return nil
			}
			return a.waitJobs(ctx, cl, names, last, timeout)
		},
	}
	c.Flags().BoolVarP(&wait, "wait", "w", false, "wait until every task runs or has finished, showing progress")
	c.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "with --wait: give up after this long")
	c.Flags().StringArrayVar(&secrets, "secret", nil, "NAME: give the secret_env variable NAME the value of $NAME in your environment (repeat the flag); it is sealed, never logged")
	return c
}

// jobCounts are a job's tasks by state.
type jobCounts struct {
	pending, scheduled, running, dead, total int32
	state                                    string
}

func (j jobCounts) String() string {
	return fmt.Sprintf("%d pending, %d scheduled, %d running, %d dead", j.pending, j.scheduled, j.running, j.dead)
}

// waitJobs shows the jobs' progress until none has a task pending or
// scheduled, the timeout passes, or a job turns out unschedulable.
func (a *app) waitJobs(ctx context.Context, cl *client, names []string, minPos int64, timeout time.Duration) error {
	start := time.Now()
	deadline := start.Add(timeout)
	live := isTerminal(a.stderr())
	lastLine := ""
	prev := map[string]jobCounts{}
	stuck := map[string]int{}
	var whys map[string]*apipb.WhyPendingReply
	clear := func() {
		if live && lastLine != "" {
			fmt.Fprint(a.stderr(), "\r\033[K")
		}
	}
	for {
		counts := map[string]jobCounts{}
		for _, n := range names {
			var v *apipb.JobView
			err := cl.read(ctx, func(ctx context.Context, c apipb.CellClient) (err error) {
				v, err = c.Get(ctx, &apipb.GetRequest{Job: n, Read: &apipb.ReadOptions{MinPosition: minPos}, TaskLimit: 1})
				return err
			})
			if err != nil {
				clear()
				return err
			}
			counts[n] = jobCounts{pending: v.Pending, scheduled: v.Scheduled, running: v.Running, dead: v.Dead, total: v.TotalTasks, state: v.State}
		}
		elapsed := time.Since(start).Truncate(100 * time.Millisecond)
		var parts []string
		done := true
		for _, n := range names {
			k := counts[n]
			parts = append(parts, fmt.Sprintf("%s: %s", n, k))
			if k.pending+k.scheduled > 0 && k.state != "dead" {
				done = false
			}
		}
		line := strings.Join(parts, "; ") + fmt.Sprintf(" (%s)", elapsed)
		if live {
			fmt.Fprint(a.stderr(), "\r\033[K"+line)
		} else if stripElapsed(line) != stripElapsed(lastLine) {
			fmt.Fprintln(a.stderr(), line)
		}
		lastLine = line
		if done {
			clear()
			for _, n := range names {
				k := counts[n]
				switch {
				case k.state == "dead" && k.running == 0:
					fmt.Fprintf(a.stdout(), "%s/%s: job ended: %d of %d tasks dead (%s)\n", cl.user, n, k.dead, k.total, elapsed)
				case k.dead == 0:
					fmt.Fprintf(a.stdout(), "%s/%s: all %d tasks running (%s)\n", cl.user, n, k.total, elapsed)
				default:
					fmt.Fprintf(a.stdout(), "%s/%s: %d running, %d finished or dead, of %d tasks (%s)\n", cl.user, n, k.running, k.dead, k.total, elapsed)
				}
			}
			return nil
		}
		// A job whose pending tasks the scheduler has examined and placed
		// nowhere, with no progress for three looks, will not start by
		// waiting: say why and stop.
		whys = map[string]*apipb.WhyPendingReply{}
		unschedulable := false
		for _, n := range names {
			k := counts[n]
			if k.pending == 0 || elapsed < time.Second {
				stuck[n] = 0
				continue
			}
			var why *apipb.WhyPendingReply
			err := cl.read(ctx, func(ctx context.Context, c apipb.CellClient) (err error) {
				why, err = c.WhyPending(ctx, &apipb.WhyPendingRequest{Job: n})
				return err
			})
			if err != nil || len(why.Classes) == 0 || k != prev[n] {
				stuck[n] = 0
				continue
			}
			whys[n] = why
			if stuck[n]++; stuck[n] >= 3 {
				unschedulable = true
			}
		}
		prev = counts
		if unschedulable || time.Now().After(deadline) {
			clear()
			if unschedulable {
				fmt.Fprintf(a.stdout(), "stopped waiting after %s: tasks cannot be scheduled\n", elapsed)
			} else {
				fmt.Fprintf(a.stdout(), "timed out after %s: %s\n", elapsed, strings.Join(parts, "; "))
			}
			for _, n := range names {
				why := whys[n]
				if why == nil && counts[n].pending > 0 {
					_ = cl.read(ctx, func(ctx context.Context, c apipb.CellClient) (err error) {
						why, err = c.WhyPending(ctx, &apipb.WhyPendingRequest{Job: n})
						return err
					})
				}
				if why != nil {
					writeWhy(a.stdout(), why)
				}
			}
			return &silentErr{code: ExitFailed}
		}
		select {
		case <-ctx.Done():
			clear()
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func stripElapsed(line string) string {
	if i := strings.LastIndex(line, " ("); i >= 0 {
		return line[:i]
	}
	return line
}

// isTerminal reports whether w is a terminal (for the live progress line).
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
