package webui_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/corralhq/corral/commands/api"
	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/commands/master"
	"github.com/corralhq/corral/commands/webui"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/events/sqlitestore"
	"github.com/corralhq/corral/fauxmaster"
	"github.com/corralhq/corral/projections"
)

// t0 is the fixture's first event time.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// history builds a log one event at a time, a second apart.
type history struct {
	now time.Time
	evs []events.Event
}

func (h *history) add(stream string, d events.Payload) {
	if h.now.IsZero() {
		h.now = t0
	}
	h.now = h.now.Add(time.Second)
	h.evs = append(h.evs, events.New(stream, h.now, d))
}

func res(cpu, mem int64) *events.Resources {
	return &events.Resources{CpuMilli: cpu, MemoryBytes: mem, DiskBytes: 10 << 30, Ports: 100}
}

const gib = int64(1) << 30

func (h *history) machine(name string) {
	h.add(events.MachineStream(name), &events.MachineRegistered{Machine: name, Address: "127.0.0.1:9" + name[1:], Capacity: res(4000, 8*gib),
		Attributes: map[string]string{"rack": "r1", "arch": "amd64"}})
}

func (h *history) job(user, name string, prio, tasks int32, r *events.Resources, labels map[string]string) {
	spec := &events.JobSpec{User: user, Name: name, Priority: prio, TaskCount: tasks, Command: "/bin/sh",
		Args: []string{"-c", "while true; do sleep 1; done"}, Resources: r, Labels: labels}
	h.add(events.JobStream(user, name), &events.JobSubmitted{Spec: spec, SpecVersion: 1})
	for i := int32(0); i < tasks; i++ {
		h.add(events.TaskStream(user, name, i), &events.TaskSubmitted{User: user, Job: name, Index: i, SpecVersion: 1, Reason: "new"})
	}
}

func (h *history) run(user, job string, index int32, machine string) {
	h.add(events.TaskStream(user, job, index), &events.TaskScheduled{User: user, Job: job, Index: index, Machine: machine, SpecVersion: 1, Score: 0.5, MachinesExamined: 3})
	h.add(events.TaskStream(user, job, index), &events.TaskStarted{User: user, Job: job, Index: index, Machine: machine, Pid: 4242})
}

// smallCell is a cell of three machines: alice/web runs three tasks (one
// of them evicted by carol/hog and pending again), bob/huge cannot fit,
// m2 is down.
func smallCell() []events.Event {
	h := &history{}
	for _, m := range []string{"m0", "m1", "m2"} {
		h.machine(m)
	}
	h.job("alice", "web", 9, 3, res(500, 256<<20), map[string]string{"team": "web"})
	h.run("alice", "web", 0, "m0")
	h.run("alice", "web", 1, "m1")
	h.run("alice", "web", 2, "m0")
	for i := 0; i < 5; i++ {
		h.add(events.MachineStream("m0"), &events.UsageReported{Machine: "m0", WindowStartUs: h.now.UnixMicro(), WindowEndUs: h.now.Add(10 * time.Second).UnixMicro(),
			Tasks: []*events.TaskUsage{
				{User: "alice", Job: "web", Index: 0, CpuCoreSeconds: float64(i + 1), MemoryBytes: int64(100+10*i) << 20, MemoryMaxBytes: int64(120+10*i) << 20},
				{User: "alice", Job: "web", Index: 2, CpuCoreSeconds: 0.5, MemoryBytes: 50 << 20},
			}})
	}
	h.add(events.MachineStream("m0"), &events.ReservationEstimated{Machine: "m0", Tasks: []*events.TaskReservation{
		{User: "alice", Job: "web", Index: 0, Reservation: res(300, 200<<20)}}})
	h.add(events.TaskStream("alice", "web", 0), &events.TaskHealthChanged{User: "alice", Job: "web", Index: 0, Machine: "m0",
		Message: "GET /: connection refused"})
	h.job("bob", "huge", 4, 2, res(100, 64*gib), map[string]string{"team": "data"})
	h.job("carol", "hog", 11, 1, res(3800, 1*gib), nil)
	h.add(events.TaskStream("alice", "web", 1), &events.TaskEvicted{User: "alice", Job: "web", Index: 1, Machine: "m1", Reason: "preempted",
		Preemptor: &events.TaskRef{User: "carol", Job: "hog", Index: 0}, Message: "a monitoring task needed the room"})
	h.add(events.TaskStream("alice", "web", 1), &events.TaskSubmitted{User: "alice", Job: "web", Index: 1, SpecVersion: 1, Reason: "rescheduled"})
	h.add(events.TaskStream("carol", "hog", 0), &events.TaskScheduled{User: "carol", Job: "hog", Index: 0, Machine: "m1", SpecVersion: 1,
		Preempted: []*events.TaskRef{{User: "alice", Job: "web", Index: 1}}})
	h.add(events.TaskStream("alice", "web", 2), &events.TaskFailed{User: "alice", Job: "web", Index: 2, Machine: "m0", ExitCode: 3, Message: "exited", WillRestart: true})
	h.add(events.MachineStream("m2"), &events.MachineDown{Machine: "m2", Reason: "missed 3 polls", MissedPolls: 3})
	return h.evs
}

// testCell is a master over a log in SQLite, not running (reads need no
// lease), with the UI on top.
type testCell struct {
	store *sqlitestore.Store
	m     *master.Master
	svc   *api.Service
	ui    *webui.Handler
}

func openCell(t testing.TB, evs []events.Event) *testCell {
	t.Helper()
	ctx := context.Background()
	store, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "events.db"), sqlitestore.Options{PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	for i := 0; i < len(evs); i += 20_000 {
		chunk := evs[i:min(i+20_000, len(evs))]
		if _, err := store.Append(ctx, events.AppendRequest{ExpectedPosition: int64(i), Events: chunk}); err != nil {
			t.Fatal(err)
		}
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	m, err := master.New(ctx, master.Config{Name: "master1", Store: store, Logger: quiet, Admins: []string{"root"}})
	if err != nil {
		t.Fatal(err)
	}
	svc := api.NewService(m)
	svc.Explain = explainFits
	ui, err := webui.New(webui.Config{API: svc, Cell: m, Streams: store, Log: store, Replay: replayHere(store), Logger: quiet, Hosts: []string{"example.com"},
		Clock: func() time.Time { return t0.Add(time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	return &testCell{store: store, m: m, svc: svc, ui: ui}
}

// replayHere runs a what-if replay in the test's process: the work of the
// binary's child process (fauxmaster.Replay over the same log), without
// the process, whose bounds cmd/corral's tests hold.
func replayHere(log projections.Source) func(context.Context, webui.ReplayRequest) (*fauxmaster.Report, error) {
	return func(ctx context.Context, r webui.ReplayRequest) (*fauxmaster.Report, error) {
		change, err := fauxmaster.ParseChange(r.Change)
		if err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
		return fauxmaster.Replay(ctx, log, r.From, r.To, fauxmaster.Options{Change: change, Seed: 1})
	}
}

// explainFits stands in for the scheduler: every pending class fits on no
// machine for memory.
func explainFits(s *projections.State, j *projections.Job) *apipb.WhyPendingReply {
	out := &apipb.WhyPendingReply{User: j.User, Job: j.Name, Pending: int32(j.PendingTasks())}
	var idx []int32
	for _, t := range j.Tasks {
		if t != nil && t.State == projections.TaskPending {
			idx = append(idx, t.Index)
		}
	}
	out.Classes = []*apipb.PendingClass{{TaskIndexes: idx, MachinesConsidered: int32(len(s.Machines)),
		Rejections: []*apipb.RejectionCount{{Reason: "insufficient memory", Machines: int32(len(s.Machines))}},
		Hints:      []string{"ask for at most 8GiB of memory: no machine has more"}, Summary: "no machine has the memory"}}
	out.Summary = "tasks fit on none of the machines: ask for at most 8GiB of memory"
	return out
}

// get serves one request and returns the status and body.
func (c *testCell) get(t testing.TB, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	c.ui.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code, rec.Body.String()
}

// postSQL runs a query through the console's form, with a browser's CSRF
// cookie and the token the form carries.
func (c *testCell) postSQL(t testing.TB, q, format string) (int, string) {
	t.Helper()
	const tok = "0123456789abcdef0123456789abcdef-token"
	form := url.Values{"q": {q}, "csrf": {tok}}
	if format != "" {
		form.Set("format", format)
	}
	req := httptest.NewRequest(http.MethodPost, "/sql", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(&http.Cookie{Name: "corral_csrf", Value: tok})
	rec := httptest.NewRecorder()
	c.ui.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

func mustContain(t *testing.T, what, body string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(body, w) {
			t.Errorf("%s: no %q in the page", what, w)
		}
	}
}
