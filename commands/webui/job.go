package webui

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

var taskStates = []string{"pending", "scheduled", "running", "dead", "finished", "failed", "killed", "evicted", "lost"}

type jobData struct {
	User, Name  string
	Job         *apipb.JobView
	Shown       string // the job's state as shown: finished told from dead
	Spec        specView
	State       string // the task state filter
	StateErr    string
	States      []string
	Tasks       []taskRow
	Pager       pager
	HasHealth   bool
	Why         *apipb.WhyPendingReply
	WhyErr      string
	Timeline    []*apipb.EventView
	TimelineErr string
	// Links to the timeline's earlier page and back to its newest.
	EarlierEvents, NewestEvents string
	Update                      *updateProgress
	EventsLink                  string
}

type taskRow struct {
	*apipb.TaskView
	Health   string
	LastExit string
}

// updateProgress is a rolling update's state.
type updateProgress struct {
	From, To       int64
	AtNew, Total   int
	Replacing      int
	MaxDisruptions int32
}

// specView is a resolved spec, for people.
type specView struct {
	Command     string
	Band        string
	Priority    int32
	TaskCount   int32
	Resources   string
	Constraints []string
	Labels      map[string]string
	Env         []string
	Restart     string
	Health      string
	Update      string
	StartAfter  string
	AllocSet    string
	AppClass    string
	Package     string
	Ports       []string
	Overrides   int
	JSON        string
}

var specJSON = protojson.MarshalOptions{Multiline: true, Indent: "  ", UseProtoNames: true}

func newSpecView(s *events.JobSpec) specView {
	if s == nil {
		return specView{}
	}
	v := specView{
		Command: shellQuote(append([]string{s.Command}, s.Args...)), Priority: s.Priority,
		Band: projections.BandOf(s.Priority).String(), TaskCount: s.TaskCount, Resources: resources(s.Resources),
		Labels: s.Labels, StartAfter: s.StartAfter, AllocSet: s.AllocSet, AppClass: s.Appclass, Package: s.Package,
		Ports: s.PortNames, Overrides: len(s.Overrides),
	}
	for _, c := range s.Constraints {
		txt := c.Attribute + " " + c.Op
		if len(c.Values) > 0 {
			txt += " " + strings.Join(c.Values, ",")
		}
		if c.Soft {
			txt += " (soft)"
		}
		v.Constraints = append(v.Constraints, txt)
	}
	secret := map[string]bool{}
	for _, k := range s.SecretEnv {
		secret[k] = true
	}
	for _, k := range sortedKeys(s.Env) {
		val := s.Env[k]
		if secret[k] {
			val = "(secret)"
		}
		v.Env = append(v.Env, k+"="+val)
	}
	if r := s.Restart; r != nil {
		mode := r.Mode
		if mode == "" {
			mode = "on-failure"
		}
		v.Restart = mode
		if r.MaxRestarts > 0 {
			v.Restart += fmt.Sprintf(", at most %d restarts", r.MaxRestarts)
		}
		if r.BackoffInitialMs > 0 {
			v.Restart += fmt.Sprintf(", backoff %d–%d ms", r.BackoffInitialMs, r.BackoffMaxMs)
		}
	} else {
		v.Restart = "on-failure (default)"
	}
	if hc := s.HealthCheck; hc != nil {
		port := fmt.Sprintf("%q", hc.PortName)
		if hc.PortName == "" {
			port = "the first port"
		}
		v.Health = fmt.Sprintf("GET %s on %s every %s, %d failures allowed", hc.Path, port, events.HealthCheckPeriod(hc), hc.FailuresAllowed)
	}
	if u := s.Update; u != nil && u.MaxDisruptions > 0 {
		v.Update = fmt.Sprintf("at most %d tasks disrupted at once", u.MaxDisruptions)
	}
	if b, err := specJSON.Marshal(s); err == nil {
		v.JSON = string(b)
	}
	return v
}

// shellQuote prints a command line so it can be pasted into a shell.
func shellQuote(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if a != "" && !strings.ContainsAny(a, " \t\n'\"\\$`;&|<>()*?[]{}~#!") {
			out[i] = a
			continue
		}
		out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(out, " ")
}

func (h *Handler) job(w http.ResponseWriter, r *http.Request) {
	user, name := r.PathValue("user"), r.PathValue("job")
	offset, err := intParam(r, "offset", 0)
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err)
		return
	}
	// before pages the timeline back: the events at or before it.
	before, err := intParam(r, "before", 0)
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err)
		return
	}
	ctx := h.ctx(r)
	d := jobData{User: user, Name: name, State: strings.TrimSpace(r.URL.Query().Get("state")), States: taskStates,
		EventsLink: eventsURL("user", user, "job", name)}
	if d.State != "" && !contains(taskStates, d.State) {
		h.fail(w, r, http.StatusBadRequest, fmt.Errorf("state: %q is not a task state (one of %s)", d.State, strings.Join(taskStates, ", ")))
		return
	}
	// The job without its tasks (offset past any task): the table below
	// reads them by page, filtered by state.
	d.Job, err = h.cfg.API.Get(ctx, &apipb.GetRequest{User: user, Job: name, TaskOffset: math.MaxInt32 - 1, TaskLimit: 1})
	if err != nil {
		h.failAPI(w, r, err)
		return
	}
	d.Shown = h.jobRows([]*apipb.JobView{d.Job})[0].Shown
	d.Spec = newSpecView(d.Job.Spec)
	d.HasHealth = d.Job.Spec.GetHealthCheck() != nil
	tasks, err := h.cfg.API.ListTasks(ctx, &apipb.ListTasksRequest{User: user, Job: name, State: d.State, Offset: int32(min(offset, math.MaxInt32)), Limit: int32(h.cfg.PageSize)})
	if err != nil {
		h.failAPI(w, r, err)
		return
	}
	for _, t := range tasks.Tasks {
		d.Tasks = append(d.Tasks, newTaskRow(t, d.HasHealth))
	}
	d.Pager = newPager(r, "offset", offset, h.cfg.PageSize, int(tasks.Total))

	// Asked while tasks wait, and while tasks run: the answer also says
	// when they are not spread as the scheduler wants (Why.Spread).
	if d.Job.Pending > 0 || d.Job.Scheduled+d.Job.Running > 1 {
		d.Why, err = h.cfg.API.WhyPending(ctx, &apipb.WhyPendingRequest{User: user, Job: name})
		if err != nil {
			d.WhyErr = status.Convert(err).Message()
			if status.Code(err) == codes.Unimplemented {
				d.WhyErr = "No scheduler runs in this master, so nothing explains why tasks wait."
			}
		}
	}
	if d.Job.UpdateInProgress {
		d.Update = h.updateProgress(user, name)
	}

	// The timeline: the job's events since its submission, newest first,
	// a page at a time.
	tl, err := jobTimeline(ctx, h.cfg.API, user, name, d.Job.SubmittedUs, int64(before))
	if err != nil {
		d.TimelineErr = status.Convert(err).Message()
	} else {
		d.Timeline = tl.Events
		q := r.URL.Query()
		if tl.Earlier > 0 {
			q.Set("before", strconv.FormatInt(tl.Earlier, 10))
			d.EarlierEvents = r.URL.Path + "?" + q.Encode() + "#timeline"
		}
		if before > 0 {
			q.Del("before")
			d.NewestEvents = r.URL.Path + "?" + q.Encode() + "#timeline"
		}
	}
	h.render(w, r, "job", page{Title: "Job " + user + "/" + name, Nav: "jobs", Data: d})
}

func newTaskRow(t *apipb.TaskView, hasHealth bool) taskRow {
	row := taskRow{TaskView: t}
	switch {
	case t.Health == "unhealthy":
		row.Health = "unhealthy: " + t.HealthMessage
	case t.Health != "":
		row.Health = t.Health
	case hasHealth && t.State == "running":
		row.Health = "not checked yet"
	}
	if t.Restarts > 0 || t.State == "dead" {
		switch {
		case t.How == "killed" || t.How == "evicted" || t.How == "lost":
			row.LastExit = t.How
		case t.ExitCode != 0 || t.State == "dead":
			row.LastExit = "exit " + strconv.Itoa(int(t.ExitCode))
		}
		if t.Reason != "" && t.How != "finished" && t.Reason != "new" && t.Reason != "rescheduled" {
			if row.LastExit != "" {
				row.LastExit += ": "
			}
			row.LastExit += t.Reason
		}
	}
	return row
}

// updateProgress counts a rolling update's tasks in the state; the API's
// view of a job carries only that one is in progress.
func (h *Handler) updateProgress(user, name string) *updateProgress {
	var u *updateProgress
	h.cfg.Cell.View(func(st *projections.State) {
		j := st.Job(user, name)
		if j == nil || j.Update == nil {
			return
		}
		u = &updateProgress{From: j.Update.From, To: j.Update.To, MaxDisruptions: j.Spec().GetUpdate().GetMaxDisruptions()}
		for _, t := range j.Tasks {
			if t == nil || t.State == projections.TaskDead {
				continue
			}
			u.Total++
			if t.SpecVersion == j.Update.To && !t.Replacing {
				u.AtNew++
			}
			if t.Replacing {
				u.Replacing++
			}
		}
	})
	return u
}
