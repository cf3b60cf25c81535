package cli

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/corralhq/corral/cmd/corral/internal/jobfile"
	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/projections"
)

func (a *app) jobCommand() *cobra.Command {
	c := &cobra.Command{Use: "job", Short: "submit, update, kill and inspect jobs"}
	c.AddCommand(a.jobSubmitCommand(), a.jobUpdateCommand(), a.jobKillCommand(), a.jobListCommand(), a.jobGetCommand(),
		a.jobRenderCommand(), a.jobCommitCommand(), a.jobRollbackCommand())
	c.PersistentFlags().StringArrayVar(&a.jpaths, "jpath", nil, "a folder Jsonnet job files may import from, besides the job file's own (repeatable); imports resolving elsewhere are refused")
	return c
}

// loadFile reads a job file as the caller.
func (a *app) loadFile(path string) (*jobfile.File, error) {
	user := a.caller()
	if user == "" {
		user = "nobody"
	}
	return jobfile.Load(path, jobfile.Options{User: user, ExtVars: map[string]string{"cell": a.cellName()}, JPaths: a.jpaths})
}

// addSecrets gives the jobs of f the values of the secret variables named
// (--secret NAME), read from the caller's environment: each must be in a
// job's secret_env. The master seals them before anything is recorded.
func (a *app) addSecrets(f *jobfile.File, names []string) error {
	for _, name := range names {
		val, ok := a.lookupEnv(name)
		if !ok {
			return usageErr("--secret %s: $%s is not set in your environment", name, name)
		}
		used := false
		for _, spec := range f.Jobs {
			if !slices.Contains(spec.SecretEnv, name) {
				continue
			}
			if spec.Env == nil {
				spec.Env = map[string]string{}
			}
			spec.Env[name] = val
			used = true
		}
		if !used {
			return usageErr("--secret %s: no job of the file lists %s in secret_env", name, name)
		}
	}
	return nil
}

// lookupEnv is os.LookupEnv, or the test's Getenv (set when not empty).
func (a *app) lookupEnv(k string) (string, bool) {
	if a.env.Getenv == nil {
		return os.LookupEnv(k)
	}
	v := a.env.Getenv(k)
	return v, v != ""
}

func (a *app) cellName() string {
	if c := a.getenv("CORRAL_CELL"); c != "" {
		return c
	}
	return DefaultCell
}

// DefaultCell is the cell name of `corral up`.
const DefaultCell = "dev"

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

func (a *app) jobUpdateCommand() *cobra.Command {
	var selector string
	var secrets []string
	var priority int
	c := &cobra.Command{
		Use:   "update FILE | --selector SEL --priority N",
		Short: "change running jobs: a rolling update to the spec of FILE, or the priority of every job matching a selector",
		Long: `Update the jobs of FILE to their new spec. Changes that need a restart
(command, resources, constraints) replace tasks a few at a time, never more
than the job's update.max_disruptions at once; keep or undo the update with
` + "`corral job commit`" + ` or ` + "`corral job rollback`" + `.`,
		Args: args(0, 1, "a job file, or --selector"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			cl, err := a.client()
			if err != nil {
				return err
			}
			defer cl.Close()
			ctx := cmd.Context()
			if selector != "" {
				if len(argv) > 0 || !cmd.Flags().Changed("priority") {
					return usageErr("--selector updates only the priority: give --priority N and no file")
				}
				rep, err := cl.mutate(ctx, func(ctx context.Context, c apipb.CellClient, id string, o ...grpc.CallOption) (*apipb.MutationReply, error) {
					return c.Update(ctx, &apipb.UpdateRequest{RequestId: id, Selector: selector, Priority: int32(priority)}, o...)
				})
				if err != nil {
					return err
				}
				fmt.Fprintf(a.stdout(), "jobs matching %q: %s\n", selector, rep.Message)
				return nil
			}
			if len(argv) != 1 {
				return usageErr("give a job file, or --selector and --priority")
			}
			f, err := a.loadFile(argv[0])
			if err != nil {
				return err
			}
			if err := a.addSecrets(f, secrets); err != nil {
				return err
			}
			for _, spec := range f.Jobs {
				rep, err := cl.mutate(ctx, func(ctx context.Context, c apipb.CellClient, id string, o ...grpc.CallOption) (*apipb.MutationReply, error) {
					return c.Update(ctx, &apipb.UpdateRequest{RequestId: id, Spec: spec}, o...)
				})
				if err != nil {
					return fmt.Errorf("updating %s: %w", spec.Name, err)
				}
				fmt.Fprintf(a.stdout(), "job %s/%s updated: %s\n", cl.user, spec.Name, rep.Message)
			}
			a.note("next: watch it with `corral job get %s`; keep it with `corral job commit %s` or undo it with `corral job rollback %s`", f.Jobs[0].Name, f.Jobs[0].Name, f.Jobs[0].Name)
			return nil
		},
	}
	c.Flags().StringVarP(&selector, "selector", "l", "", "label selector of the jobs to change, e.g. team=web,tier!=canary")
	c.Flags().IntVar(&priority, "priority", 0, "with --selector: the new priority (0-11)")
	c.Flags().StringArrayVar(&secrets, "secret", nil, "NAME: a new value for the secret_env variable NAME from $NAME in your environment (repeat the flag); secrets not given keep their values")
	return c
}

func (a *app) jobKillCommand() *cobra.Command {
	var selector, reason, user string
	c := &cobra.Command{
		Use:   "kill NAME... | --selector SEL",
		Short: "kill jobs by name or by label selector",
		Args:  args(0, -1, "job names, or --selector"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			if (len(argv) == 0) == (selector == "") {
				return usageErr("give job names or --selector, not both or neither")
			}
			cl, err := a.client()
			if err != nil {
				return err
			}
			defer cl.Close()
			reqs := []*apipb.KillRequest{}
			for _, n := range argv {
				reqs = append(reqs, &apipb.KillRequest{User: user, Job: n, Reason: reason})
			}
			if selector != "" {
				reqs = append(reqs, &apipb.KillRequest{User: user, Selector: selector, Reason: reason})
			}
			failed := false
			for _, r := range reqs {
				rep, err := cl.mutate(cmd.Context(), func(ctx context.Context, c apipb.CellClient, id string, o ...grpc.CallOption) (*apipb.MutationReply, error) {
					r.RequestId = id
					return c.Kill(ctx, r, o...)
				})
				what := r.Job
				if what == "" {
					what = "jobs matching " + strconv.Quote(r.Selector)
				}
				if err != nil {
					a.note("corral: killing %s: %s", what, a.describe(err))
					failed = true
					continue
				}
				fmt.Fprintf(a.stdout(), "killed %s: %s\n", what, rep.Message)
			}
			if failed {
				return &silentErr{code: ExitFailed}
			}
			return nil
		},
	}
	c.Flags().StringVarP(&selector, "selector", "l", "", "label selector, e.g. team=web,tier!=canary")
	c.Flags().StringVar(&reason, "reason", "", "why, recorded in the log")
	c.Flags().StringVar(&user, "owner", "", "the jobs' owner (default you; admins may name another)")
	return c
}

// jobListPage is the jobs `job list` asks for at a time (the master's
// most); a variable so that a test can page through a few.
var jobListPage = 1000

func (a *app) jobListCommand() *cobra.Command {
	var selector, state, owner string
	var all bool
	var limit int
	c := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "list jobs",
		Args:    args(0, 0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := a.client()
			if err != nil {
				return err
			}
			defer cl.Close()
			user := cl.user
			if owner != "" {
				user = owner
			}
			if all {
				user = ""
			}
			if limit < 0 {
				return usageErr("--limit %d: want 0 (every job) or more", limit)
			}
			// The master answers at most a page at a time: page through
			// until every job (or --limit) is read.
			page := jobListPage
			l := &apipb.JobList{}
			for {
				want := page
				if limit > 0 {
					want = min(page, limit-len(l.Jobs))
				}
				var p *apipb.JobList
				err = cl.read(cmd.Context(), func(ctx context.Context, c apipb.CellClient) (err error) {
					p, err = c.List(ctx, &apipb.ListRequest{User: user, Selector: selector, State: state,
						Offset: int32(len(l.Jobs)), Limit: int32(want)})
					return err
				})
				if err != nil {
					return err
				}
				l.Jobs, l.Total, l.Position = append(l.Jobs, p.Jobs...), p.Total, p.Position
				if len(p.Jobs) < want || int(p.Total) <= len(l.Jobs) || limit > 0 && len(l.Jobs) >= limit {
					break
				}
			}
			if left := int(l.Total) - len(l.Jobs); left > 0 {
				defer a.note("(%d of %d jobs shown; --limit 0 shows every one)", len(l.Jobs), l.Total)
			}
			now := time.Now()
			t := &table{cols: []string{"JOB", "STATE", "PRIORITY", "RUNNING", "PENDING", "DEAD", "TASKS", "AGE", "LABELS"}}
			for _, j := range l.Jobs {
				p := j.Spec.GetPriority()
				t.add(j.Spec.GetUser()+"/"+j.Spec.GetName(), j.State, fmt.Sprintf("%d (%s)", p, projections.BandOf(p)),
					strconv.Itoa(int(j.Running+j.Scheduled)), strconv.Itoa(int(j.Pending)), strconv.Itoa(int(j.Dead)),
					strconv.Itoa(int(j.TotalTasks)), ago(j.SubmittedUs, now), labelsText(j.Spec.GetLabels()))
			}
			if len(l.Jobs) == 0 && a.output == "table" {
				a.note("no jobs%s; submit one with `corral job submit examples/hello.jsonnet`", forWhom(user))
			}
			return a.show(t, protoList(l.Jobs))
		},
	}
	c.Flags().StringVarP(&selector, "selector", "l", "", "label selector, e.g. team=web")
	c.Flags().StringVar(&state, "state", "", "only jobs in this state: pending, running or dead")
	c.Flags().StringVar(&owner, "owner", "", "list another user's jobs")
	c.Flags().BoolVarP(&all, "all", "A", false, "list every user's jobs")
	c.Flags().IntVar(&limit, "limit", 0, "show at most this many jobs (default 0: every one)")
	return c
}

func forWhom(user string) string {
	if user == "" {
		return ""
	}
	return " of " + user
}

func labelsText(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return orDash(strings.Join(parts, ","))
}

func (a *app) jobGetCommand() *cobra.Command {
	var owner string
	c := &cobra.Command{
		Use:   "get NAME",
		Short: "show a job and its tasks",
		Args:  args(1, 1, "one job name"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			cl, err := a.client()
			if err != nil {
				return err
			}
			defer cl.Close()
			var j *apipb.JobView
			err = cl.read(cmd.Context(), func(ctx context.Context, c apipb.CellClient) (err error) {
				j, err = c.Get(ctx, &apipb.GetRequest{User: owner, Job: argv[0], TaskLimit: 10000})
				return err
			})
			if err != nil {
				return err
			}
			if a.output != "table" {
				return a.show(tasksTable(j.Tasks, time.Now()), j)
			}
			s := j.Spec
			w := a.stdout()
			now := time.Now()
			fmt.Fprintf(w, "job:        %s/%s (version %d)\n", s.GetUser(), s.GetName(), j.SpecVersion)
			fmt.Fprintf(w, "state:      %s: %d running, %d scheduled, %d pending, %d dead of %d tasks\n", j.State, j.Running, j.Scheduled, j.Pending, j.Dead, j.TotalTasks)
			fmt.Fprintf(w, "priority:   %d (%s)\n", s.GetPriority(), projections.BandOf(s.GetPriority()))
			fmt.Fprintf(w, "command:    %s\n", commandLine(s.GetCommand(), s.GetArgs()))
			fmt.Fprintf(w, "resources:  %s per task\n", resourcesText(s.GetResources()))
			fmt.Fprintf(w, "labels:     %s\n", labelsText(s.GetLabels()))
			fmt.Fprintf(w, "submitted:  %s (%s ago)\n", timeText(j.SubmittedUs), ago(j.SubmittedUs, now))
			fmt.Fprintf(w, "dns:        %s\n", strings.TrimSuffix(jobDNS(s.GetName(), s.GetUser(), a.cellName()), "."))
			if j.EndedUs != 0 {
				fmt.Fprintf(w, "ended:      %s: %s\n", timeText(j.EndedUs), j.EndReason)
			}
			if j.UpdateInProgress {
				fmt.Fprintf(w, "update:     in progress from version %d (`corral job commit %s` or `corral job rollback %s`)\n", j.UpdateFrom, s.GetName(), s.GetName())
			}
			if j.Deferred {
				fmt.Fprintf(w, "deferred:   starts after %s finishes\n", s.GetStartAfter())
			}
			fmt.Fprintln(w)
			return writeTable(w, tasksTable(j.Tasks, now), "table")
		},
	}
	c.Flags().StringVar(&owner, "owner", "", "the job's owner (default you)")
	return c
}

func (a *app) jobRenderCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "render FILE",
		Short: "print the job spec(s) a file resolves to, as JSON (or -o yaml)",
		Long: `Evaluate FILE (Jsonnet, YAML or JSON), check it as a submission would, and
print what it resolves to: quantities, bands and durations written out. The
output is itself a job file. Errors name the file, line and field.`,
		Args: args(1, 1, "one job file"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			f, err := a.loadFile(argv[0])
			if err != nil {
				return err
			}
			format := "json"
			if a.output == "yaml" {
				format = "yaml"
			}
			out, err := f.Render(format)
			if err != nil {
				return err
			}
			_, err = a.stdout().Write(out)
			return err
		},
	}
}

func (a *app) jobCommitCommand() *cobra.Command {
	return a.jobRequestCommand("commit NAME", "keep a job's update: it can no longer be rolled back",
		func(ctx context.Context, c apipb.CellClient, r *apipb.JobRequest, o ...grpc.CallOption) (*apipb.MutationReply, error) {
			return c.CommitUpdate(ctx, r, o...)
		})
}

func (a *app) jobRollbackCommand() *cobra.Command {
	return a.jobRequestCommand("rollback NAME", "undo a job's update: its tasks go back to the previous spec",
		func(ctx context.Context, c apipb.CellClient, r *apipb.JobRequest, o ...grpc.CallOption) (*apipb.MutationReply, error) {
			return c.RollbackUpdate(ctx, r, o...)
		})
}

func (a *app) jobRequestCommand(use, short string, call func(context.Context, apipb.CellClient, *apipb.JobRequest, ...grpc.CallOption) (*apipb.MutationReply, error)) *cobra.Command {
	var owner string
	c := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  args(1, 1, "one job name"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			cl, err := a.client()
			if err != nil {
				return err
			}
			defer cl.Close()
			rep, err := cl.mutate(cmd.Context(), func(ctx context.Context, c apipb.CellClient, id string, o ...grpc.CallOption) (*apipb.MutationReply, error) {
				return call(ctx, c, &apipb.JobRequest{RequestId: id, User: owner, Job: argv[0]}, o...)
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout(), "%s: %s\n", argv[0], rep.Message)
			return nil
		},
	}
	c.Flags().StringVar(&owner, "owner", "", "the job's owner (default you)")
	return c
}

// commandLine prints a command and its arguments on one line, quoting the
// arguments a shell would need quoted.
func commandLine(cmd string, argv []string) string {
	parts := []string{cmd}
	for _, a := range argv {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`;&|<>()*?[]#~") {
			a = strconv.Quote(a)
		}
		parts = append(parts, a)
	}
	return strings.Join(parts, " ")
}
