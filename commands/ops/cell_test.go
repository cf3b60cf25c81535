package ops_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/corralhq/corral/agent"
	"github.com/corralhq/corral/commands/api"
	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/commands/master"
	"github.com/corralhq/corral/commands/ops"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/internal/testkit"
)

// cell is a whole cell in one process, wired as `corral master` wires it:
// an instrumented store, a master with its scheduler loop and link hooked
// to the metrics, the API behind the metrics interceptors, an HTTP server
// with /metrics and /readyz, and real agents with their own
// HTTP servers.
type cell struct {
	t      *testing.T
	m      *master.Master
	addr   string // gRPC
	web    string // HTTP
	client apipb.CellClient
	logs   *testkit.SyncBuffer

	mu     sync.Mutex
	agents map[string]string // machine -> its HTTP address
}

// fakeAnalytics stands for the Infrastore: it has ingested what its
// position function says.
type fakeAnalytics struct{ position func() int64 }

func (f fakeAnalytics) Query(ctx context.Context, r *apipb.QueryRequest) (*apipb.QueryReply, error) {
	return &apipb.QueryReply{Columns: []string{"1"}, Rows: []*apipb.QueryRow{{Values: []string{"1"}, Null: []bool{false}}}, Position: f.position()}, nil
}

func (f fakeAnalytics) ExportBill(context.Context, *apipb.BillRequest, func([]byte) error) error {
	return nil
}

func (f fakeAnalytics) Costs(context.Context, *apipb.CostsRequest) (*apipb.CostsReply, error) {
	return nil, errors.New("no costs here")
}

func (f fakeAnalytics) Bill(ctx context.Context, r *apipb.BillRequest) (*apipb.BillReply, error) {
	return &apipb.BillReply{}, nil
}

func startCell(t *testing.T, store events.Store, machines int) *cell {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	logs := &testkit.SyncBuffer{}
	level := new(slog.LevelVar)
	log, err := ops.NewLogger(logs, "json", level)
	if err != nil {
		t.Fatal(err)
	}
	reg := ops.NewRegistry()
	istore := ops.InstrumentStore(store, reg)
	mm := ops.NewMaster(reg)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	expl := master.NewExplanations()
	m, err := master.New(ctx, master.Config{Name: "master1", Advertise: lis.Addr().String(), Store: istore, Admins: []string{"root"}, Logger: log,
		OnLeading: []func(context.Context, *master.Master){
			master.SchedulerLoop(master.SchedulerConfig{Interval: 50 * time.Millisecond, Explanations: expl, Metrics: mm}),
			master.Link(master.LinkConfig{Cell: "test", Interval: 200 * time.Millisecond, MissedPolls: 3, UsageWindow: time.Second, StopGrace: time.Second, Metrics: mm}),
		}})
	if err != nil {
		t.Fatal(err)
	}
	mm.Watch(m)
	mm.Consumer("infrastore", func(context.Context) (int64, error) { return m.Position(), nil })
	g := grpc.NewServer(mm.ServerOptions(log)...)
	svc := api.NewService(m)
	svc.Explain = expl.Explain
	svc.Analytics = fakeAnalytics{position: m.Position}
	svc.Register(g)
	master.NewAgentRegistry(m, "test", 200*time.Millisecond).Attach(g)
	go g.Serve(lis)
	mdone := make(chan struct{})
	go func() { defer close(mdone); m.Run(ctx) }()

	mux := http.NewServeMux()
	mux.Handle("GET /metrics", ops.MetricsHandler(reg))
	mux.Handle("GET /readyz", ops.Readyz(2*time.Second, ops.MasterChecks(m, 100)...))
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	web := &http.Server{Handler: mux}
	go web.Serve(hl)

	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	c := &cell{t: t, m: m, addr: lis.Addr().String(), web: hl.Addr().String(), client: apipb.NewCellClient(conn), logs: logs, agents: map[string]string{}}
	stopAgents := c.startAgents(machines, log)
	t.Cleanup(func() {
		stopAgents()
		conn.Close()
		web.Close()
		g.Stop()
		cancel()
		<-mdone
	})
	return c
}

// startAgents starts agents of the cell's master on machines m0, m1, ...,
// sampling usage (no cgroups); stop ends them and waits.
func (c *cell) startAgents(machines int, log *slog.Logger) (stop func()) {
	t := c.t
	var agentsDone sync.WaitGroup
	agentCtx, stopAgents := context.WithCancel(context.Background())
	for i := range machines {
		name := fmt.Sprintf("m%d", i)
		agentsDone.Add(1)
		go func() {
			defer agentsDone.Done()
			err := agent.Run(agentCtx, agent.Config{Name: name, Masters: []string{c.addr}, ListenAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
				DataDir:   filepath.Join(t.TempDir(), name),
				Capacity:  &events.Resources{CpuMilli: 2000, MemoryBytes: 2 << 30, DiskBytes: 10 << 30, Ports: 100},
				PortFirst: int32(32000 + 200*i), PortLast: int32(32000 + 200*i + 99), Cgroups: "sampling",
				SampleInterval: 100 * time.Millisecond, ReregisterAfter: 2 * time.Second, StopTasksOnExit: true, DefaultGrace: time.Second,
				Logger: log,
				OnHTTPListen: func(addr string) {
					c.mu.Lock()
					c.agents[name] = addr
					c.mu.Unlock()
				}})
			if err != nil && agentCtx.Err() == nil {
				t.Errorf("agent %s: %v", name, err)
			}
		}()
	}
	return func() {
		stopAgents()
		agentsDone.Wait()
	}
}

func as(user string) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), api.UserHeader, user)
}

// get fetches an HTTP path.
func get(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		t.Fatalf("GET %s%s: %v", addr, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// metrics are the samples of one scrape, by series as the text format
// prints it: name{label="value",...} (labels in name order).
type metrics map[string]float64

func scrape(t *testing.T, addr string) metrics {
	t.Helper()
	code, body := get(t, addr, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	out := metrics{}
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("sample %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// sum adds every sample of a metric whose labels include each of want
// (`state="running"`, ...).
func (m metrics) sum(name string, want ...string) float64 {
	total := 0.0
	for series, v := range m {
		n, labels, _ := strings.Cut(series, "{")
		if n != name {
			continue
		}
		ok := true
		for _, w := range want {
			if !strings.Contains(labels, w) {
				ok = false
			}
		}
		if ok {
			total += v
		}
	}
	return total
}

func (m metrics) has(name string) bool {
	for series := range m {
		if n, _, _ := strings.Cut(series, "{"); n == name {
			return true
		}
	}
	return false
}

func (c *cell) waitMachines(n int) {
	c.t.Helper()
	testkit.Eventually(c.t, 15*time.Second, fmt.Sprintf("%d machines up and polled", n), func() (bool, string) {
		ms, err := c.client.ListMachines(as("root"), &apipb.ListMachinesRequest{})
		if err != nil {
			return false, err.Error()
		}
		polled := 0
		for _, m := range ms.Machines {
			if m.State == "up" && m.LastPollUs != 0 {
				polled++
			}
		}
		return polled == n, fmt.Sprintf("%d registered, %d polled", len(ms.Machines), polled)
	})
}

func (c *cell) agentAddrs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, a := range c.agents {
		out = append(out, a)
	}
	return out
}
