package cli

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/commands/nameservice"
	"github.com/spf13/cobra"
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
