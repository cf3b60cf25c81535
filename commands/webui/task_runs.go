package webui

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"google.golang.org/grpc/status"

	"github.com/corralhq/corral/projections"
)

// A task's earlier runs: the task page lists them, each linking a page
// of its logs read from the machine where it ran (api.Service's
// RunLogs, the path `corral task logs --run N` takes, under
// commands.MayReadLogs), or saying why they are gone.

// runRow is one earlier run on the task page.
type runRow struct {
	Number               int
	Machine, MachineHref string
	Started, Ended       string
	Href                 string
}

// runData is the page of one earlier run's logs.
type runData struct {
	Task           string
	TaskHref       string
	Run            int
	Machine        string
	Stdout, Stderr string
}

// earlierRuns lists key's runs before its latest, the latest first.
func (h *Handler) earlierRuns(ctx context.Context, key projections.TaskKey) ([]runRow, string) {
	runs, err := h.cfg.Logs.TaskRunsOf(ctx, key)
	if err != nil {
		return nil, "The earlier runs are unavailable: " + status.Convert(err).Message()
	}
	last := len(runs) - 1 // the latest, shown above
	if len(runs) > 0 && runs[last].Restarting {
		last++ // the agent restarts it: the latest is the next
	}
	if last < 1 {
		return nil, "This is the task's only run since its job was submitted."
	}
	var rows []runRow
	for i := last - 1; i >= 0; i-- {
		r := runs[i]
		rows = append(rows, runRow{Number: r.Number, Machine: r.Machine, MachineHref: machineURL(r.Machine),
			Started: time.UnixMicro(r.StartedUS).UTC().Format(time.RFC3339), Ended: r.Ended,
			Href: taskURL(key.User, key.Job, key.Index) + "/runs/" + strconv.Itoa(r.Number)})
	}
	return rows, ""
}

// taskRun shows the end of one run's stdout and stderr.
func (h *Handler) taskRun(w http.ResponseWriter, r *http.Request) {
	user, name := r.PathValue("user"), r.PathValue("job")
	idx, err := strconv.ParseInt(r.PathValue("index"), 10, 32)
	if err != nil || idx < 0 {
		h.fail(w, r, http.StatusBadRequest, fmt.Errorf("index: %q is not a task index", r.PathValue("index")))
		return
	}
	run, err := strconv.ParseInt(r.PathValue("run"), 10, 32)
	if err != nil || run < 0 {
		h.fail(w, r, http.StatusBadRequest, fmt.Errorf("run: %q is not a run number (from 0, the task's first run)", r.PathValue("run")))
		return
	}
	if h.cfg.Logs == nil {
		h.fail(w, r, http.StatusNotFound, fmt.Errorf("this master reads no logs from agents"))
		return
	}
	ctx := h.ctx(r)
	key := projections.TaskKey{User: user, Job: name, Index: int32(idx)}
	if err := h.cfg.Logs.MayReadLogs(ctx, key); err != nil {
		h.failAPI(w, r, err)
		return
	}
	d := runData{Task: key.String(), TaskHref: taskURL(user, name, int32(idx)), Run: int(run)}
	runs, err := h.cfg.Logs.TaskRunsOf(ctx, key)
	if err != nil {
		h.failAPI(w, r, err)
		return
	}
	if int(run) < len(runs) {
		d.Machine = runs[run].Machine
	}
	lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	for _, s := range []struct {
		name string
		dst  *string
	}{{"stdout", &d.Stdout}, {"stderr", &d.Stderr}} {
		b, err := h.cfg.Logs.RunLogs(lctx, key, int32(run), s.name, logTail)
		if err != nil {
			*s.dst = "(" + s.name + " is unavailable: " + status.Convert(err).Message() + ")"
			continue
		}
		*s.dst = string(b)
	}
	h.render(w, r, "run", page{Title: fmt.Sprintf("Run %d of task %s", run, key), Nav: "jobs", Data: d})
}
