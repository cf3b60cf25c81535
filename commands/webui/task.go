package webui

import (
	"cmp"
	"context"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strconv"
	"time"

	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/corralhq/corral/commands/api"
	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// historyLimit bounds the events a task page lists.
const historyLimit = 2000

// logTail is how much of each log the task page shows.
const logTail = 16 << 10

// usageRanges are the chart ranges offered on a task page.
var usageRanges = []string{"15m", "1h", "6h", "24h", "7d"}

type taskData struct {
	Task        *apipb.TaskView
	Signal      string
	JobState    string
	Spec        specView
	History     []historyRow
	HistoryNote string
	Range       string
	Ranges      []string
	CPU, Memory template.HTML
	UsageNote   string
	Stdout      string
	Stderr      string
	LogsNote    string
	HasLogs     bool
	FollowURL   string // the logs' live streams, under /stdout and /stderr
	Health      string
	// Runs are the task's earlier runs, each linking its logs on the
	// machine where it ran (task_runs.go); RunsNote says why none are.
	Runs     []runRow
	RunsNote string
}

// historyRow is one event of a task's life, with what to link.
type historyRow struct {
	*apipb.EventView
	Machine   string // a machine to link
	Preemptor *events.TaskRef
	Detail    string
}

func (h *Handler) task(w http.ResponseWriter, r *http.Request) {
	user, name := r.PathValue("user"), r.PathValue("job")
	idx, err := strconv.ParseInt(r.PathValue("index"), 10, 32)
	if err != nil || idx < 0 {
		h.fail(w, r, http.StatusBadRequest, fmt.Errorf("index: %q is not a task index", r.PathValue("index")))
		return
	}
	rng := r.URL.Query().Get("range")
	if rng == "" {
		rng = "1h"
	}
	span, err := time.ParseDuration(rng)
	if rng == "7d" {
		span, err = 7*24*time.Hour, nil
	}
	if err != nil || !contains(usageRanges, rng) {
		h.fail(w, r, http.StatusBadRequest, fmt.Errorf("range: %q is not one of 15m, 1h, 6h, 24h, 7d", rng))
		return
	}
	d := taskData{Range: rng, Ranges: usageRanges}
	var submittedUS int64
	h.cfg.Cell.View(func(st *projections.State) {
		t := st.Task(user, name, int32(idx))
		if t == nil {
			return
		}
		d.Task = api.TaskView(st, t)
		d.Signal, d.JobState, submittedUS = t.Signal, t.Job.State().String(), t.Job.SubmittedUS
		d.Spec = newSpecView(t.Spec())
	})
	if d.Task == nil {
		h.fail(w, r, http.StatusNotFound, fmt.Errorf("task %s/%s/%d does not exist", user, name, idx))
		return
	}
	d.Health = newTaskRow(d.Task, d.Spec.Health != "").Health
	ctx := h.ctx(r)
	key := projections.TaskKey{User: user, Job: name, Index: int32(idx)}

	// History: the task's stream.
	evs, note := h.taskHistory(ctx, key, submittedUS)
	d.HistoryNote = note
	machines := d.history(evs)

	// Usage over the range, from the machines' usage windows.
	now := h.cfg.Clock()
	to := now.UnixMicro()
	from := max(submittedUS, to-span.Microseconds())
	d.CPU, d.Memory, d.UsageNote = h.usageCharts(ctx, key, d.Task, machines, from, to)

	h.taskLogs(ctx, &d, key)
	h.render(w, r, "task", page{Title: fmt.Sprintf("Task %s/%s/%d", user, name, idx), Nav: "jobs", Script: "logs.js", Data: d})
}

// history fills the task's history from its stream's events and returns
// the machines it ran on, in order, the one it is on last.
func (d *taskData) history(evs []*apipb.EventView) []string {
	machines := []string{}
	seen := map[string]bool{}
	for _, e := range evs {
		row := historyRow{EventView: e}
		detailOf(&row, e)
		if row.Machine != "" && !seen[row.Machine] {
			seen[row.Machine] = true
			machines = append(machines, row.Machine)
		}
		d.History = append(d.History, row)
	}
	if d.Task.Machine != "" && !seen[d.Task.Machine] {
		machines = append(machines, d.Task.Machine)
	}
	return machines
}

// taskLogs fills the tails of the task's logs from its agent, for those who
// may read them, and its earlier runs.
func (h *Handler) taskLogs(ctx context.Context, d *taskData, key projections.TaskKey) {
	switch {
	case h.cfg.Logs == nil:
		d.LogsNote = "This master reads no logs from agents. They are on the machine, in the agent's data directory under tasks/" +
			key.User + "/" + key.Job + "/" + strconv.Itoa(int(key.Index)) + "/logs/ (stdout, stderr, and rotated stdout.1, ...)."
	case d.Task.Machine == "":
		d.LogsNote = "The task has never been placed on a machine, so it has no logs."
	default:
		if err := h.cfg.Logs.MayReadLogs(ctx, key); err != nil {
			d.LogsNote = status.Convert(err).Message()
			break
		}
		d.HasLogs = true
		d.FollowURL = taskURL(key.User, key.Job, key.Index) + "/logs"
		lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		for _, s := range []struct {
			name string
			dst  *string
		}{{"stdout", &d.Stdout}, {"stderr", &d.Stderr}} {
			b, err := h.cfg.Logs.TailLogs(lctx, key, s.name, logTail)
			if err != nil {
				*s.dst = "(" + s.name + " is unavailable: " + status.Convert(err).Message() + ")"
				continue
			}
			*s.dst = string(b)
		}
		cancel()
		d.Runs, d.RunsNote = h.earlierRuns(ctx, key)
	}
}

// taskHistory reads a task's events: by stream when the store is at hand,
// else by scanning the log from the job's submission.
func (h *Handler) taskHistory(ctx context.Context, key projections.TaskKey, submittedUS int64) ([]*apipb.EventView, string) {
	stream := events.TaskStream(key.User, key.Job, key.Index)
	if h.cfg.Streams != nil {
		evs, err := h.cfg.Streams.ReadStream(ctx, stream)
		if err != nil {
			return nil, "The history is unavailable: " + err.Error()
		}
		note := ""
		if len(evs) > historyLimit {
			note = fmt.Sprintf("Showing the latest %d of %d events.", historyLimit, len(evs))
			evs = evs[len(evs)-historyLimit:]
		}
		out := make([]*apipb.EventView, len(evs))
		for i, e := range evs {
			out[i] = api.EventView(e)
		}
		return out, note
	}
	// The API filters by stream prefix: task 1's prefix matches task 10.
	list, err := h.cfg.API.Events(ctx, &apipb.EventsRequest{StreamPrefix: stream, SinceUs: submittedUS - 1_000_000, Limit: historyLimit})
	if err != nil {
		return nil, "The history is unavailable: " + status.Convert(err).Message()
	}
	var out []*apipb.EventView
	for _, e := range list.Events {
		if e.Stream == stream {
			out = append(out, e)
		}
	}
	note := ""
	if len(list.Events) == historyLimit {
		note = fmt.Sprintf("Showing the task's events among the first %d matching %s*; later ones are on the events page.", historyLimit, stream)
	}
	return out, note
}

var unmarshal = protojson.UnmarshalOptions{DiscardUnknown: true}

// detailOf fills what a history row links: the machine, the preemptor.
func detailOf(row *historyRow, e *apipb.EventView) {
	kind, ok := events.Lookup(e.Type)
	if !ok {
		return
	}
	msg := kind.New()
	if err := unmarshal.Unmarshal([]byte(e.PayloadJson), msg); err != nil {
		return
	}
	switch p := msg.(type) {
	case *events.TaskScheduled:
		row.Machine = p.Machine
		row.Detail = fmt.Sprintf("spec version %d", p.SpecVersion)
		if len(p.Ports) > 0 {
			row.Detail += fmt.Sprintf(", ports %v", p.Ports)
		}
	case *events.TaskStarted:
		row.Machine = p.Machine
	case *events.TaskEvicted:
		row.Machine, row.Preemptor, row.Detail = p.Machine, p.Preemptor, p.Message
	case *events.TaskFailed:
		row.Machine = p.Machine
		if p.WillRestart {
			row.Detail = "the agent restarts it in place"
		}
	case *events.TaskFinished:
		row.Machine = p.Machine
	case *events.TaskKilled:
		row.Machine = p.Machine
	case *events.TaskLost:
		row.Machine = p.Machine
	case *events.TaskStopped:
		row.Machine, row.Detail = p.Machine, "its process is gone, its resources free"
	}
}

// usageCharts draws a task's CPU and memory over [from, to] from the
// usage windows and reservation estimates of the machines it ran on,
// against its limit and reservation.
func (h *Handler) usageCharts(ctx context.Context, key projections.TaskKey, t *apipb.TaskView, machines []string, from, to int64) (cpu, mem template.HTML, note string) {
	var cpuUse, memUse, memMax, cpuRes, memRes []point
	for _, m := range machines {
		stream := events.MachineStream(m)
		list, err := h.cfg.API.Events(ctx, &apipb.EventsRequest{StreamPrefix: stream, SinceUs: from, Limit: 100_000})
		if err != nil {
			note = "Usage is unavailable: " + status.Convert(err).Message()
			continue
		}
		for _, e := range list.Events {
			if e.Stream != stream { // machine m1's prefix matches m10
				continue
			}
			switch e.Type {
			case "UsageReported":
				var p events.UsageReported
				if unmarshal.Unmarshal([]byte(e.PayloadJson), &p) != nil {
					continue
				}
				for _, u := range p.Tasks {
					if u.User != key.User || u.Job != key.Job || u.Index != key.Index {
						continue
					}
					secs := float64(p.WindowEndUs-p.WindowStartUs) / 1e6
					if u.EndUs > 0 { // the task's own part of the window
						secs = float64(u.EndUs-u.StartUs) / 1e6
					}
					if secs > 0 {
						cpuUse = append(cpuUse, point{p.WindowEndUs, u.CpuCoreSeconds / secs})
					}
					memUse = append(memUse, point{p.WindowEndUs, float64(u.MemoryBytes)})
					memMax = append(memMax, point{p.WindowEndUs, float64(u.MemoryMaxBytes)})
				}
			case "ReservationEstimated":
				var p events.ReservationEstimated
				if unmarshal.Unmarshal([]byte(e.PayloadJson), &p) != nil {
					continue
				}
				for _, r := range p.Tasks {
					if r.User == key.User && r.Job == key.Job && r.Index == key.Index {
						cpuRes = append(cpuRes, point{e.OccurredAtUs, float64(r.Reservation.GetCpuMilli()) / 1000})
						memRes = append(memRes, point{e.OccurredAtUs, float64(r.Reservation.GetMemoryBytes())})
					}
				}
			}
		}
	}
	sortPoints(cpuUse, memUse, memMax, cpuRes, memRes)
	// The reservation before the first estimate in range is not known
	// here: the current one is drawn when none moved.
	if len(cpuRes) == 0 {
		cpuRes = []point{{from, float64(t.Reservation.GetCpuMilli()) / 1000}}
		memRes = []point{{from, float64(t.Reservation.GetMemoryBytes())}}
	}
	limitCPU := []point{{from, float64(t.Limit.GetCpuMilli()) / 1000}}
	limitMem := []point{{from, float64(t.Limit.GetMemoryBytes())}}
	cpu = lineChart{ID: "cpu", Title: "CPU (cores): usage per window against limit and reservation", Unit: cores, From: from, To: to,
		Series: []series{
			{Name: "limit", Class: "limit", Points: limitCPU, Step: true},
			{Name: "reservation", Class: "reservation", Points: cpuRes, Step: true},
			{Name: "usage", Class: "usage", Points: cpuUse},
		}}.HTML()
	mem = lineChart{ID: "memory", Title: "Memory: mean and peak resident per window against limit and reservation",
		Unit: func(v float64) string { return humanBytes(int64(v)) }, From: from, To: to,
		Series: []series{
			{Name: "limit", Class: "limit", Points: limitMem, Step: true},
			{Name: "reservation", Class: "reservation", Points: memRes, Step: true},
			{Name: "peak", Class: "peak", Points: memMax},
			{Name: "mean", Class: "usage", Points: memUse},
		}}.HTML()
	if note == "" && len(cpuUse) == 0 && len(memUse) == 0 {
		note = "No usage window in this range names the task: agents report usage once per window."
	}
	return cpu, mem, note
}

func sortPoints(lists ...[]point) {
	for _, l := range lists {
		slices.SortStableFunc(l, func(a, b point) int { return cmp.Compare(a.T, b.T) })
	}
}
