package ops_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corralhq/corral/commands/ops"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/events/storetest"
)

// recordingStore answers every method with a value of its own and records
// the call.
type recordingStore struct{ calls []string }

var (
	errRecorded = errors.New("recorded")
	leaseA      = events.Lease{Name: "leader", Holder: "a", Epoch: 7}
	checkpointA = events.Checkpoint{Name: "state", Position: 9, State: []byte("s")}
)

func (r *recordingStore) call(name string) { r.calls = append(r.calls, name) }

func (r *recordingStore) Append(ctx context.Context, req events.AppendRequest) (events.AppendResult, error) {
	r.call("Append")
	return events.AppendResult{First: 11, Last: 12}, nil
}
func (r *recordingStore) AppendMany(ctx context.Context, reqs []events.AppendRequest) ([]events.AppendResult, error) {
	r.call("AppendMany")
	return []events.AppendResult{{First: 13, Last: 13}}, errRecorded
}
func (r *recordingStore) Read(ctx context.Context, from int64, limit int) ([]events.Event, error) {
	r.call("Read")
	return []events.Event{{Position: from}}, nil
}
func (r *recordingStore) ReadStream(ctx context.Context, stream string) ([]events.Event, error) {
	r.call("ReadStream")
	return []events.Event{{Stream: stream}}, nil
}
func (r *recordingStore) Head(ctx context.Context) (int64, error) { r.call("Head"); return 42, nil }
func (r *recordingStore) Subscribe(after int64) *events.Subscription {
	r.call("Subscribe")
	return events.NewSubscription(r, nil, after, 1, time.Second)
}
func (r *recordingStore) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (events.Lease, error) {
	r.call("AcquireLease")
	return leaseA, events.ErrLeaseHeld
}
func (r *recordingStore) RenewLease(ctx context.Context, l events.Lease, ttl time.Duration) (events.Lease, error) {
	r.call("RenewLease")
	return leaseA, nil
}
func (r *recordingStore) ReleaseLease(ctx context.Context, l events.Lease) error {
	r.call("ReleaseLease")
	return errRecorded
}
func (r *recordingStore) Request(ctx context.Context, key string) (events.Request, bool, error) {
	r.call("Request")
	return events.Request{Key: key, First: 21, Last: 22}, true, nil
}
func (r *recordingStore) CurrentLease(ctx context.Context, name string) (events.Lease, bool, error) {
	r.call("CurrentLease")
	return leaseA, true, nil
}
func (r *recordingStore) SaveCheckpoint(ctx context.Context, c events.Checkpoint) error {
	r.call("SaveCheckpoint")
	return nil
}
func (r *recordingStore) LoadCheckpoint(ctx context.Context, name string, atOrBefore int64) (events.Checkpoint, bool, error) {
	r.call("LoadCheckpoint")
	return checkpointA, true, nil
}
func (r *recordingStore) Close() error { r.call("Close"); return errRecorded }

// Every method of the instrumented store reaches the inner store once and
// returns what it returned.
func TestInstrumentedStoreDelegatesEveryMethod(t *testing.T) {
	inner := &recordingStore{}
	var s events.Store = ops.InstrumentStore(inner, prometheus.NewRegistry())
	ctx := context.Background()
	check := func(name string, ok bool) {
		t.Helper()
		if !ok {
			t.Errorf("%s: not what the inner store returned", name)
		}
		if n := len(inner.calls); n == 0 || inner.calls[n-1] != name {
			t.Errorf("%s: the inner store saw %v", name, inner.calls)
		}
	}
	res, err := s.Append(ctx, events.AppendRequest{})
	check("Append", res.First == 11 && res.Last == 12 && err == nil)
	many, err := s.AppendMany(ctx, []events.AppendRequest{{}})
	check("AppendMany", len(many) == 1 && many[0].First == 13 && err == errRecorded)
	evs, err := s.Read(ctx, 5, 10)
	check("Read", len(evs) == 1 && evs[0].Position == 5 && err == nil)
	evs, err = s.ReadStream(ctx, "cell")
	check("ReadStream", len(evs) == 1 && evs[0].Stream == "cell" && err == nil)
	h, err := s.Head(ctx)
	check("Head", h == 42 && err == nil)
	sub := s.Subscribe(3)
	check("Subscribe", sub.Position() == 3)
	l, err := s.AcquireLease(ctx, "leader", "a", time.Second)
	check("AcquireLease", l == leaseA && err == events.ErrLeaseHeld)
	l, err = s.RenewLease(ctx, leaseA, time.Second)
	check("RenewLease", l == leaseA && err == nil)
	check("ReleaseLease", s.ReleaseLease(ctx, leaseA) == errRecorded)
	rq, ok, err := s.Request(ctx, "k")
	check("Request", rq.Key == "k" && rq.First == 21 && ok && err == nil)
	l, ok, err = s.CurrentLease(ctx, "leader")
	check("CurrentLease", l == leaseA && ok && err == nil)
	check("SaveCheckpoint", s.SaveCheckpoint(ctx, checkpointA) == nil)
	cp, ok, err := s.LoadCheckpoint(ctx, "state", 10)
	check("LoadCheckpoint", cp.Position == 9 && ok && err == nil)
	check("Close", s.Close() == errRecorded)
	if len(inner.calls) != 14 {
		t.Errorf("the inner store saw %d calls, want 14: %v", len(inner.calls), inner.calls)
	}
	if s.(*ops.Store).Unwrap() != inner {
		t.Error("Unwrap does not return the inner store")
	}
}

func TestInstrumentedStoreCounts(t *testing.T) {
	reg := prometheus.NewRegistry()
	inner, _ := openSQLite(t)
	s := ops.InstrumentStore(inner, reg)
	ctx := context.Background()
	req := events.AppendRequest{IdempotencyKey: "a", Events: []events.Event{storetest.Machine(1), storetest.Machine(2)}}
	if _, err := s.Append(ctx, req); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, req); err != nil { // a retry: appends nothing
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, events.AppendRequest{ExpectedPosition: 0, Events: []events.Event{storetest.Machine(3)}}); err == nil {
		t.Fatal("a stale expectation was appended")
	}
	if err := s.SaveCheckpoint(ctx, events.Checkpoint{Name: "state", Position: 2, TakenAt: time.Now().Add(-time.Minute), State: []byte("xyz")}); err != nil {
		t.Fatal(err)
	}
	got := gather(t, reg)
	for series, want := range map[string]float64{
		`corral_events_appended_total{type="MachineRegistered"}`:              2,
		`corral_store_requests_total{op="append",result="ok"}`:                2,
		`corral_store_requests_total{op="append",result="conflict"}`:          1,
		`corral_store_requests_total{op="append_request",result="duplicate"}`: 1,
		`corral_store_requests_total{op="save_checkpoint",result="ok"}`:       1,
		`corral_checkpoint_position`:                                          2,
		`corral_checkpoint_bytes`:                                             3,
	} {
		if got[series] != want {
			t.Errorf("%s = %v, want %v", series, got[series], want)
		}
	}
	if age := got[`corral_checkpoint_age_seconds`]; age < 59 || age > 120 {
		t.Errorf("checkpoint age %v s, want about 60", age)
	}
	// Two stores into one registry share the series rather than panic.
	ops.InstrumentStore(inner, reg)
}

// gather renders reg as series -> value, labels in name order.
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	ops.MetricsHandler(reg).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	out := map[string]float64{}
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		var v float64
		if err := json.Unmarshal([]byte(line[i+1:]), &v); err == nil {
			out[line[:i]] = v
		}
	}
	return out
}

func TestLoggerFormatsAndLevelAtRunTime(t *testing.T) {
	var buf strings.Builder
	level := new(slog.LevelVar)
	log, err := ops.NewLogger(&buf, "json", level)
	if err != nil {
		t.Fatal(err)
	}
	log.Debug("hidden")
	log.Info("task started", "user", "alice", "job", "web", "task", 3, "position", 42)
	var rec map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(buf.String())), &rec); err != nil {
		t.Fatalf("not one JSON record: %q: %v", buf.String(), err)
	}
	if rec["msg"] != "task started" || rec["job"] != "web" || rec["position"] != 42.0 {
		t.Errorf("record %v", rec)
	}

	h := ops.LevelHandler(level, nil)
	put := httptest.NewRecorder()
	h.ServeHTTP(put, httptest.NewRequest("PUT", "/debug/loglevel", strings.NewReader("debug")))
	if put.Code != 200 || put.Body.String() != "debug\n" || level.Level() != slog.LevelDebug {
		t.Fatalf("PUT debug: %d %q, level %v", put.Code, put.Body, level.Level())
	}
	buf.Reset()
	log.Debug("shown")
	if !strings.Contains(buf.String(), "shown") {
		t.Errorf("debug record not written after the level changed: %q", buf.String())
	}
	bad := httptest.NewRecorder()
	h.ServeHTTP(bad, httptest.NewRequest("PUT", "/debug/loglevel?level=loud", nil))
	if bad.Code != 400 || !strings.Contains(bad.Body.String(), `log level "loud": want debug, info, warn or error`) || level.Level() != slog.LevelDebug {
		t.Errorf("PUT loud: %d %q, level %v", bad.Code, bad.Body, level.Level())
	}
	getRec := httptest.NewRecorder()
	h.ServeHTTP(getRec, httptest.NewRequest("GET", "/debug/loglevel", nil))
	if getRec.Body.String() != "debug\n" {
		t.Errorf("GET: %q", getRec.Body)
	}

	buf.Reset()
	text, err := ops.NewLogger(&buf, "text", nil)
	if err != nil {
		t.Fatal(err)
	}
	text.Info("hello", "job", "web")
	if !strings.Contains(buf.String(), "msg=hello job=web") {
		t.Errorf("text record %q", buf.String())
	}
	if _, err := ops.NewLogger(&buf, "xml", nil); err == nil || !strings.Contains(err.Error(), `log format "xml": want text or json`) {
		t.Errorf("xml: %v", err)
	}
}

func TestDebugListenerIsLoopbackOnly(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:6060", ":6060", "10.1.2.3:6060", "[::]:6060", "example.com:6060", "6060"} {
		err := ops.ServeDebug(context.Background(), addr, nil, nil, nil)
		if err == nil || !strings.Contains(err.Error(), "--debug-addr") {
			t.Errorf("%s: %v, want a refusal", addr, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan string, 1)
	done := make(chan error, 1)
	level := new(slog.LevelVar)
	go func() { done <- ops.ServeDebug(ctx, "127.0.0.1:0", level, nil, func(a string) { addrc <- a }) }()
	var addr string
	select {
	case addr = <-addrc:
	case err := <-done:
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("pprof: %d", resp.StatusCode)
	}
	req, _ := http.NewRequest("PUT", "http://"+addr+"/debug/loglevel", strings.NewReader("warn"))
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 || level.Level() != slog.LevelWarn {
		t.Errorf("PUT /debug/loglevel: %v %v, level %v", resp, err, level.Level())
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("ServeDebug after ctx ended: %v", err)
	}
}
