package master_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/corralhq/corral/agent"
	"github.com/corralhq/corral/commands/api"
	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/commands/master"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/internal/testkit"
	"github.com/corralhq/corral/projections"
)

// helperAgentEnv makes the test binary run one agent (TestHelperAgent)
// instead of the tests, so a test can kill -9 a real agent process and
// start it again on the same data dir.
const helperAgentEnv = "CORRAL_LINK_TEST_AGENT"

// helperAgentConfig is what the parent passes to an agent process.
type helperAgentConfig struct {
	Name, MasterAddr, AdvertiseAddr, DataDir string
	Cgroups, CgroupParent                    string
	PortFirst, PortLast                      int32
	StopTasksOnExit                          bool
}

// TestHelperAgent is not a test: run by a linkCell with helperAgentEnv
// set, it is an agent process until SIGTERM.
func TestHelperAgent(t *testing.T) {
	raw := os.Getenv(helperAgentEnv)
	if raw == "" {
		return
	}
	var hc helperAgentConfig
	if err := json.Unmarshal([]byte(raw), &hc); err != nil {
		fmt.Fprintln(os.Stderr, "helper agent config:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	err := agent.Run(ctx, agent.Config{
		Name: hc.Name, Masters: []string{hc.MasterAddr}, AdvertiseAddr: hc.AdvertiseAddr, ListenAddr: "127.0.0.1:0",
		DataDir: hc.DataDir, Cgroups: hc.Cgroups, CgroupParent: hc.CgroupParent,
		Capacity:  &events.Resources{CpuMilli: 2000, MemoryBytes: 2 << 30, DiskBytes: 10 << 30, Ports: 100},
		PortFirst: hc.PortFirst, PortLast: hc.PortLast,
		// The machine is shared: its free memory says nothing about this cell.
		MemoryLowWater: -1, SampleInterval: 100 * time.Millisecond, DefaultGrace: time.Second,
		ReregisterAfter: 2 * time.Second, StopTasksOnExit: hc.StopTasksOnExit,
		Logger:   slog.New(slog.NewTextHandler(os.Stderr, nil)),
		OnListen: func(addr string) { fmt.Println("LISTEN", addr) },
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// linkCell is a cell for the link's failure tests: a master in this process
// (it can be stopped and started again on the same store and address), and
// agents in processes of their own, which can be killed with SIGKILL and
// started again on their data dirs, or cut off by a proxy.
type linkCell struct {
	t        *testing.T
	store    events.Store
	linkCfg  master.LinkConfig
	schedCfg master.SchedulerConfig
	addr     string // the master's, the same across restarts
	run      string // in every task's environment: finds this test's processes
	dir      string
	cgroups  string // the cgroup parent of this cell's agents

	mu      sync.Mutex
	master  *liveMaster
	agents  map[string]*agentProc
	proxies map[string]*proxy
	ports   int32
}

type liveMaster struct {
	m      *master.Master
	client apipb.CellClient
	stats  *master.LinkStats
	stop   func()
}

type agentProc struct {
	name string
	cmd  *exec.Cmd
	addr string // where it listens
	exit chan struct{}
}

var runs atomic.Int64

func newLinkCell(t *testing.T, cfg master.LinkConfig, sched ...func(*master.SchedulerConfig)) *linkCell {
	t.Helper()
	cfg.Cell = "test"
	sc := master.SchedulerConfig{Interval: 50 * time.Millisecond}
	for _, f := range sched {
		f(&sc)
	}
	c := &linkCell{t: t, store: backends[1].Open(t), linkCfg: cfg, schedCfg: sc, dir: t.TempDir(),
		run:    fmt.Sprintf("%d-%d", os.Getpid(), runs.Add(1)),
		agents: map[string]*agentProc{}, proxies: map[string]*proxy{}}
	c.cgroups = "corral-linktest-" + c.run
	t.Cleanup(c.cleanup)
	c.startMaster("master1")
	return c
}

// startMaster starts a master on the cell's store and address.
func (c *linkCell) startMaster(name string) *liveMaster {
	c.t.Helper()
	addr := c.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	var lis net.Listener
	// The old listener's port may linger a moment.
	testkit.Eventually(c.t, 5*time.Second, "listening on "+addr, func() (bool, string) {
		var err error
		lis, err = net.Listen("tcp", addr)
		return err == nil, fmt.Sprint(err)
	})
	c.addr = lis.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	stats := &master.LinkStats{}
	lc := c.linkCfg
	lc.Stats = stats
	m, err := master.New(ctx, master.Config{Name: name, Advertise: c.addr, Store: c.store, Admins: []string{"root"},
		Logger: slog.New(slog.NewTextHandler(&testLog{t: c.t, prefix: name}, &slog.HandlerOptions{Level: slog.LevelWarn})),
		OnLeading: []func(context.Context, *master.Master){
			master.SchedulerLoop(c.schedCfg),
			master.Link(lc),
		}})
	if err != nil {
		c.t.Fatal(err)
	}
	g := grpc.NewServer()
	api.NewService(m).Register(g)
	master.NewAgentRegistry(m, "test", lc.Interval).Attach(g)
	go g.Serve(lis)
	done := make(chan struct{})
	go func() { defer close(done); m.Run(ctx) }()
	conn, err := grpc.NewClient(c.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		c.t.Fatal(err)
	}
	var once sync.Once
	lm := &liveMaster{m: m, client: apipb.NewCellClient(conn), stats: stats, stop: func() {
		once.Do(func() {
			conn.Close()
			g.Stop()
			cancel()
			<-done
		})
	}}
	testkit.Eventually(c.t, 15*time.Second, name+" takes the lease", func() (bool, string) { return m.Leading(), "not leading" })
	c.mu.Lock()
	c.master = lm
	c.mu.Unlock()
	return lm
}

func (c *linkCell) stopMaster() {
	c.mu.Lock()
	lm := c.master
	c.master = nil
	c.mu.Unlock()
	if lm != nil {
		lm.stop()
	}
}

func (c *linkCell) m() *master.Master { return c.master.m }

// waitPolls waits until the master has made n more rounds of polls, as
// many polls (answered or not) as n times the machines it knows: "a poll
// or two more" as a condition, not a length of time.
func (c *linkCell) waitPolls(n int) {
	c.t.Helper()
	lm := c.master
	polls := func() int64 { return lm.stats.Polls.Load() + lm.stats.Failures.Load() }
	machines := 0
	lm.m.View(func(s *projections.State) { machines = len(s.Machines) })
	want := polls() + int64(n*max(machines, 1))
	testkit.Eventually(c.t, time.Duration(n+20)*c.linkCfg.Interval, fmt.Sprintf("%d more rounds of polls of %d machines", n, machines), func() (bool, string) {
		return polls() >= want, fmt.Sprintf("%d of %d polls", polls(), want)
	})
}

// startAgent starts (or starts again, on the same data dir) an agent
// process. With viaProxy the master reaches it only through a proxy the
// test can cut.
func (c *linkCell) startAgent(name string, viaProxy bool) *agentProc {
	c.t.Helper()
	c.mu.Lock()
	px := c.proxies[name]
	if viaProxy && px == nil {
		px = newProxy(c.t)
		c.proxies[name] = px
	}
	n := c.ports
	c.ports++
	c.mu.Unlock()
	hc := helperAgentConfig{Name: name, MasterAddr: c.addr, DataDir: filepath.Join(c.dir, name), Cgroups: "auto",
		CgroupParent: c.cgroups + "/" + name, PortFirst: int32(32000 + 200*n), PortLast: int32(32000 + 200*n + 99)}
	if px != nil {
		hc.AdvertiseAddr = px.addr()
	}
	raw, _ := json.Marshal(hc)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperAgent$")
	cmd.Env = append(os.Environ(), helperAgentEnv+"="+string(raw))
	logf, err := os.OpenFile(filepath.Join(c.dir, name+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	defer logf.Close()
	cmd.Stderr = logf
	out, err := cmd.StdoutPipe()
	if err != nil {
		c.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	ap := &agentProc{name: name, cmd: cmd, exit: make(chan struct{})}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		c.t.Fatalf("agent %s did not start: %v\n%s", name, err, c.agentLog(name))
	}
	ap.addr = strings.TrimSpace(strings.TrimPrefix(line, "LISTEN "))
	go func() { _ = cmd.Wait(); close(ap.exit) }()
	if px != nil {
		px.setTarget(ap.addr)
	}
	c.mu.Lock()
	c.agents[name] = ap
	c.mu.Unlock()
	return ap
}

// killAgent ends an agent process with SIGKILL: no cleanup runs, its tasks
// keep running.
func (c *linkCell) killAgent(name string) {
	c.mu.Lock()
	ap := c.agents[name]
	delete(c.agents, name)
	c.mu.Unlock()
	if ap == nil {
		return
	}
	_ = ap.cmd.Process.Signal(syscall.SIGKILL)
	<-ap.exit
}

func (c *linkCell) agentLog(name string) string {
	b, _ := os.ReadFile(filepath.Join(c.dir, name+".log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

func (c *linkCell) cleanup() {
	c.mu.Lock()
	names := make([]string, 0, len(c.agents))
	for n := range c.agents {
		names = append(names, n)
	}
	c.mu.Unlock()
	for _, n := range names {
		c.killAgent(n)
	}
	// Tasks outlive their agents by design: end this test's.
	for _, pids := range c.procs("") {
		for _, p := range pids {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	}
	testkit.RemoveCgroups(c.t, c.cgroups)
	for _, px := range c.proxies {
		px.close()
	}
	if c.t.Failed() {
		for n := range c.proxies {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range slices.Compact(names) {
			c.t.Logf("agent %s log (tail):\n%s", n, c.agentLog(n))
		}
	}
	c.stopMaster()
}

// spec is a job of this cell: its tasks carry the cell's marker.
func (c *linkCell) spec(name string, tasks int32, script string) *events.JobSpec {
	return &events.JobSpec{Name: name, TaskCount: tasks, Command: "/bin/sh", Args: []string{"-c", script},
		Env:       map[string]string{"LINKTEST_RUN": c.run},
		Resources: &events.Resources{CpuMilli: 100, MemoryBytes: 64 << 20}}
}

func (c *linkCell) submit(spec *events.JobSpec) time.Time {
	c.t.Helper()
	at := time.Now()
	if _, err := c.master.client.Submit(as("alice"), &apipb.SubmitRequest{RequestId: "submit-" + spec.Name, Spec: spec}); err != nil {
		c.t.Fatal(err)
	}
	return at
}

// taskView is a task as the master's projection has it.
type taskView struct {
	State    projections.TaskState
	End      projections.TaskEnd
	Machine  string
	Pid      int64
	Restarts int32
	Reason   string
}

func (c *linkCell) tasks(job string) map[int32]taskView {
	out := map[int32]taskView{}
	c.m().View(func(s *projections.State) {
		j := s.Jobs[projections.JobKey{User: "alice", Name: job}]
		if j == nil {
			return
		}
		for _, t := range j.Tasks {
			if t != nil {
				out[t.Index] = taskView{t.State, t.End, t.Machine, t.Pid, t.Restarts, t.Reason}
			}
		}
	})
	return out
}

func (c *linkCell) machineState(name string) projections.MachineState {
	st := projections.MachineDown
	c.m().View(func(s *projections.State) {
		if m := s.Machines[name]; m != nil {
			st = m.State
		}
	})
	return st
}

// events returns the log's events of the given types, for job when it is
// set (machine events have no job).
// events reads the log's events of job ("" for all) of the types given
// (none: every type).
func (c *linkCell) events(job string, types ...string) []events.Event {
	c.t.Helper()
	evs, err := c.store.Read(context.Background(), 1, 1_000_000)
	if err != nil {
		c.t.Fatal(err)
	}
	var out []events.Event
	for _, e := range evs {
		if len(types) > 0 && !slices.Contains(types, e.Type) {
			continue
		}
		if job != "" && !strings.HasPrefix(e.Stream, "task/alice/"+job+"/") && e.Stream != "job/alice/"+job {
			continue
		}
		out = append(out, e)
	}
	return out
}

// procs finds the processes of this cell's tasks of job ("" for every
// job) by their environment, whichever agent started them: the ground truth
// for "no task runs twice".
func (c *linkCell) procs(job string) map[int32][]int {
	out := map[int32][]int{}
	ents, _ := os.ReadDir("/proc")
	marker := []byte("LINKTEST_RUN=" + c.run + "\x00")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !alive(pid) {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || !bytes.Contains(env, marker) {
			continue
		}
		var gotJob string
		index := int32(-1)
		for _, kv := range bytes.Split(env, []byte{0}) {
			if v, ok := bytes.CutPrefix(kv, []byte("CORRAL_JOB=")); ok {
				gotJob = string(v)
			}
			if v, ok := bytes.CutPrefix(kv, []byte("CORRAL_TASK_INDEX=")); ok {
				i, _ := strconv.Atoi(string(v))
				index = int32(i)
			}
		}
		if job == "" || gotJob == job {
			out[index] = append(out[index], pid)
		}
	}
	return out
}

// alive: the process exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, after, _ := strings.Cut(string(b), ") ")
	return !strings.HasPrefix(after, "Z")
}

// runningOn waits until the job's n tasks run (in the projection, and as
// processes with the recorded pids) on machines ok accepts.
func (c *linkCell) runningOn(job string, n int, timeout time.Duration, ok func(machine string) bool) map[int32]taskView {
	c.t.Helper()
	var ts map[int32]taskView
	testkit.Eventually(c.t, timeout, fmt.Sprintf("%d tasks of %s running", n, job), func() (bool, string) {
		ts = c.tasks(job)
		procs := c.procs(job)
		running := 0
		for i, tv := range ts {
			if tv.State == projections.TaskRunning && ok(tv.Machine) && slices.Contains(procs[i], int(tv.Pid)) {
				running++
			}
		}
		return running == n, fmt.Sprintf("tasks %v procs %v", ts, procs)
	})
	return ts
}

// testLog sends a component's log lines to the test's log.
type testLog struct {
	t      *testing.T
	prefix string
}

func (l *testLog) Write(p []byte) (int, error) {
	l.t.Logf("%s: %s", l.prefix, bytes.TrimSpace(p))
	return len(p), nil
}

// proxy stands between the master's link and one agent. Cut drops every
// connection and holds new ones open without an answer (a partition: polls
// time out); Heal forwards again.
type proxy struct {
	lis    net.Listener
	mu     sync.Mutex
	target string
	cut    bool
	conns  map[net.Conn]bool
}

func newProxy(t *testing.T) *proxy {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{lis: lis, conns: map[net.Conn]bool{}}
	go p.serve()
	return p
}

func (p *proxy) addr() string { return p.lis.Addr().String() }

func (p *proxy) setTarget(addr string) {
	p.mu.Lock()
	p.target = addr
	p.mu.Unlock()
}

func (p *proxy) serve() {
	for {
		c, err := p.lis.Accept()
		if err != nil {
			return
		}
		go p.handle(c)
	}
}

func (p *proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		c.Close()
		return false
	}
	p.conns[c] = true
	return true
}

func (p *proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *proxy) handle(c net.Conn) {
	if !p.track(c) {
		return
	}
	p.mu.Lock()
	cut, target := p.cut, p.target
	p.mu.Unlock()
	if cut || target == "" {
		return // held, unanswered, until the partition heals
	}
	u, err := net.Dial("tcp", target)
	if err != nil {
		p.untrack(c)
		return
	}
	if !p.track(u) {
		p.untrack(c)
		return
	}
	go func() { _, _ = io.Copy(u, c); p.untrack(u); p.untrack(c) }()
	go func() { _, _ = io.Copy(c, u); p.untrack(u); p.untrack(c) }()
}

// setCut starts or ends the partition. Either way every connection made so
// far is dropped: the forwarded ones when it starts, the held ones when it
// ends.
func (p *proxy) setCut(on bool) {
	p.mu.Lock()
	p.cut = on
	conns := p.conns
	p.conns = map[net.Conn]bool{}
	p.mu.Unlock()
	for c := range conns {
		c.Close()
	}
}

func (p *proxy) close() {
	p.lis.Close()
	p.mu.Lock()
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	for c := range conns {
		c.Close()
	}
}
