package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/corralhq/corral/agent"
	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/commands/nameservice"
)

func (a *app) taskCommand() *cobra.Command {
	c := &cobra.Command{Use: "task", Short: "list and inspect tasks, read their logs"}
	c.AddCommand(a.taskListCommand(), a.taskGetCommand(), a.taskLogsCommand())
	return c
}

func taskDNS(index int32, job, user, cell string) string {
	return nameservice.TaskName(index, job, user, cell)
}

func jobDNS(job, user, cell string) string { return nameservice.JobName(job, user, cell) }

func taskState(t *apipb.TaskView) string {
	if t.State == "pending" && t.NotBeforeUs > time.Now().UnixMicro() {
		return "backoff"
	}
	if t.How != "" {
		return t.State + " (" + t.How + ")"
	}
	return t.State
}

func tasksTable(tasks []*apipb.TaskView, now time.Time) *table {
	t := &table{cols: []string{"TASK", "STATE", "HEALTH", "MACHINE", "ADDRESS", "RESTARTS", "CPU", "MEMORY", "SINCE", "REASON"}}
	for _, x := range tasks {
		cpu, mem := "-", "-"
		if x.CpuCoresUsed > 0 || x.MemoryBytesUsed > 0 {
			cpu = strconv.FormatFloat(x.CpuCoresUsed, 'f', 2, 64)
			mem = bytesHuman(x.MemoryBytesUsed)
		}
		reason := x.Reason
		switch {
		case x.State == "scheduled" && x.Status != x.State:
			reason = x.Status // restarting after a failure: what failed is the news
		case x.State == "running" || x.State == "scheduled":
			reason = x.HealthMessage // the reason it last went pending is no longer news
		}
		t.add(fmt.Sprintf("%s/%d", x.Job, x.Index), taskState(x), orDash(x.Health), orDash(x.Machine), orDash(x.Address), strconv.Itoa(int(x.Restarts)),
			cpu, mem, ago(x.SinceUs, now), orDash(reason))
	}
	return t
}

func (a *app) taskListCommand() *cobra.Command {
	var selector, state, machine, owner string
	var all bool
	c := &cobra.Command{
		Use:     "list [JOB]",
		Aliases: []string{"ls"},
		Short:   "list the tasks of a job, of a machine, or of every job of yours",
		Args:    args(0, 1, "at most one job name"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			cl, err := a.client()
			if err != nil {
				return err
			}
			defer cl.Close()
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
		},
	}
	c.Flags().StringVarP(&selector, "selector", "l", "", "label selector of the jobs, e.g. team=web")
	c.Flags().StringVar(&state, "state", "", "only tasks in this state: pending, scheduled, running, stopping (killed or evicted, the process not gone yet), dead, or how they died (finished, failed, killed, evicted, lost)")
	c.Flags().StringVar(&machine, "machine", "", "the tasks on this machine")
	c.Flags().StringVar(&owner, "owner", "", "another user's tasks")
	c.Flags().BoolVarP(&all, "all", "A", false, "every user's tasks")
	return c
}

// taskArg reads "JOB INDEX" or "JOB/INDEX".
func taskArg(argv []string) (string, int32, error) {
	job, idx := "", ""
	switch {
	case len(argv) == 2:
		job, idx = argv[0], argv[1]
	case len(argv) == 1 && strings.Contains(argv[0], "/"):
		i := strings.LastIndex(argv[0], "/")
		job, idx = argv[0][:i], argv[0][i+1:]
	default:
		return "", 0, usageErr("name the task as JOB INDEX or JOB/INDEX, e.g. hello 0")
	}
	n, err := strconv.ParseInt(idx, 10, 32)
	if err != nil || n < 0 {
		return "", 0, usageErr("task index %q: want 0, 1, 2, ...", idx)
	}
	return job, int32(n), nil
}

func (a *app) getTask(ctx context.Context, cl *client, owner, job string, index int32) (*apipb.TaskView, error) {
	j, err := readValue(ctx, cl, apipb.CellClient.Get, &apipb.GetRequest{User: owner, Job: job, TaskOffset: index, TaskLimit: 1})
	if err != nil {
		return nil, err
	}
	for _, t := range j.Tasks {
		if t.Index == index {
			return t, nil
		}
	}
	return nil, fmt.Errorf("job %s has no task %d: its tasks are 0-%d", job, index, j.TotalTasks-1)
}

func (a *app) taskGetCommand() *cobra.Command {
	var owner string
	c := &cobra.Command{
		Use:               "get JOB INDEX",
		Short:             "show one task: where it runs, its address and DNS names, its usage",
		Args:              args(1, 2, "JOB INDEX or JOB/INDEX"),
		ValidArgsFunction: a.completeTask,
		RunE: func(cmd *cobra.Command, argv []string) error {
			job, index, err := taskArg(argv)
			if err != nil {
				return err
			}
			cl, err := a.client()
			if err != nil {
				return err
			}
			defer cl.Close()
			t, err := a.getTask(cmd.Context(), cl, owner, job, index)
			if err != nil {
				return err
			}
			cell := a.cellOf(cmd.Context(), cl)
			names := []string{strings.TrimSuffix(taskDNS(t.Index, t.Job, t.User, cell), "."), strings.TrimSuffix(jobDNS(t.Job, t.User, cell), ".")}
			if a.output != "table" {
				js, err := jsonOf(t)
				if err != nil {
					return err
				}
				var m map[string]any
				if err := json.Unmarshal(js, &m); err != nil {
					return err
				}
				m["dns_names"] = names
				return a.show(nil, m)
			}
			w := a.stdout()
			now := time.Now()
			fmt.Fprintf(w, "task:         %s/%s/%d\n", t.User, t.Job, t.Index)
			fmt.Fprintf(w, "state:        %s since %s (%s ago)\n", t.Status, timeText(t.SinceUs), ago(t.SinceUs, now))
			if t.Reason != "" {
				fmt.Fprintf(w, "reason:       %s\n", t.Reason)
			}
			fmt.Fprintf(w, "machine:      %s\n", orDash(t.Machine))
			fmt.Fprintf(w, "address:      %s\n", orDash(t.Address))
			if len(t.Ports) > 0 {
				ports := make([]string, len(t.Ports))
				for i, p := range t.Ports {
					ports[i] = strconv.Itoa(int(p))
				}
				fmt.Fprintf(w, "ports:        %s\n", strings.Join(ports, ", "))
			}
			fmt.Fprintf(w, "dns:          %s (A, SRV)\n", names[0])
			fmt.Fprintf(w, "              %s (SRV of every running task)\n", names[1])
			fmt.Fprintf(w, "priority:     %d\n", t.Priority)
			fmt.Fprintf(w, "spec version: %d\n", t.SpecVersion)
			fmt.Fprintf(w, "restarts:     %d (last exit code %d)\n", t.Restarts, t.ExitCode)
			fmt.Fprintf(w, "limit:        %s\n", resourcesText(t.Limit))
			fmt.Fprintf(w, "reservation:  %s\n", resourcesText(t.Reservation))
			fmt.Fprintf(w, "usage:        cpu %.2f cores, memory %s\n", t.CpuCoresUsed, bytesHuman(t.MemoryBytesUsed))
			return nil
		},
	}
	c.Flags().StringVar(&owner, "owner", "", "the job's owner (default you)")
	return c
}

func (a *app) dataDir(flag string) string {
	if flag != "" {
		return flag
	}
	if d := a.getenv("CORRAL_DATA"); d != "" {
		return d
	}
	return DefaultData
}

// DefaultData is the data directory of `corral up`.
const DefaultData = "./corral-data"

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

func (a *app) whyCommand() *cobra.Command {
	var owner, at string
	c := &cobra.Command{
		Use:   "why JOB [--at TIME|POSITION]",
		Short: "say why a job's tasks are pending (or were, at a past time)",
		Args:  args(1, 1, "one job name"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			cl, err := a.client()
			if err != nil {
				return err
			}
			defer cl.Close()
			req := &apipb.WhyPendingRequest{User: owner, Job: argv[0]}
			if at != "" {
				if req.AtPosition, req.AtTimeUs, err = parsePointUS(at, time.Now()); err != nil {
					return usageErr("--at: %v", err)
				}
			}
			why, err := readValue(cmd.Context(), cl, apipb.CellClient.WhyPending, req)
			if err != nil {
				return err
			}
			if a.output != "table" {
				return a.show(nil, why)
			}
			writeWhy(a.stdout(), why)
			return nil
		},
	}
	c.Flags().StringVar(&owner, "owner", "", "the job's owner (default you)")
	c.Flags().StringVar(&at, "at", "", "why they waited then: a time (RFC 3339; 1h for an hour ago) or a log position")
	return c
}

// writeWhy prints a why-pending explanation for people.
func writeWhy(w io.Writer, why *apipb.WhyPendingReply) {
	fmt.Fprintf(w, "%s/%s: %s\n", why.User, why.Job, why.Summary)
	if why.Spread != "" {
		fmt.Fprintf(w, "  %s\n", why.Spread)
	}
	for _, c := range why.Classes {
		if c.MachinesConsidered == 0 && len(c.Rejections) == 0 {
			// A reason recorded in the log (why --at): its words only.
			fmt.Fprintf(w, "  tasks %s: %s\n", indexRanges(c.TaskIndexes), c.Summary)
		} else {
			fmt.Fprintf(w, "  tasks %s: %d machines considered\n", indexRanges(c.TaskIndexes), c.MachinesConsidered)
		}
		for _, r := range c.Rejections {
			fmt.Fprintf(w, "    %d machine(s): %s\n", r.Machines, r.Reason)
		}
		for _, h := range c.Hints {
			fmt.Fprintf(w, "    hint: %s\n", h)
		}
	}
}

// indexRanges prints 0,1,2,5 as 0-2,5.
func indexRanges(idx []int32) string {
	if len(idx) == 0 {
		return "-"
	}
	var parts []string
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && idx[j+1] == idx[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d", idx[i], idx[j]))
		} else {
			parts = append(parts, strconv.Itoa(int(idx[i])))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}
