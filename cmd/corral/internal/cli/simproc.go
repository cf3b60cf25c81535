package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/corralhq/corral/agent/cgroup"
	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/commands/webui"
	"github.com/corralhq/corral/fauxmaster"
	"github.com/corralhq/corral/projections"
)

// simLimits bound the what-if replays the web UI asks of the master.
type simLimits struct {
	memoryBytes int64         // each replay's cgroup limit
	timeout     time.Duration // each replay's wall time
	perUser     int           // replays one user may run at once
	total       int           // replays the cell runs at once
}

// simFlags are the what-if limits' flags of `corral master` and `corral up`.
type simFlags struct {
	memory string
	limits simLimits
}

func (f *simFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&f.memory, "sim-memory", "1GiB", "memory of each what-if replay the web UI runs (a child process in a cgroup of its own)")
	fs.DurationVar(&f.limits.timeout, "sim-timeout", 2*time.Minute, "longest time of a what-if replay the web UI runs")
	fs.IntVar(&f.limits.perUser, "sim-per-user", 1, "what-if replays one user may run at once")
	fs.IntVar(&f.limits.total, "sim-concurrency", 2, "what-if replays the cell runs at once")
}

// resolve checks the flags and returns the limits.
func (f *simFlags) resolve() (simLimits, error) {
	l := f.limits
	n, err := commands.ParseBytes(f.memory)
	if err != nil {
		return l, usageErr("--sim-memory %q: %v", f.memory, err)
	}
	switch {
	case n < 128<<20:
		return l, usageErr("--sim-memory %s: at least 128MiB", f.memory)
	case l.timeout < time.Second || l.timeout > time.Hour:
		return l, usageErr("--sim-timeout %s: between 1s and 1h", l.timeout)
	case l.perUser < 1 || l.perUser > 64:
		return l, usageErr("--sim-per-user %d: between 1 and 64", l.perUser)
	case l.total < 1 || l.total > 64:
		return l, usageErr("--sim-concurrency %d: between 1 and 64", l.total)
	}
	l.memoryBytes = n
	return l, nil
}

// maxSimReport bounds the report a replay's child may write: its
// differences are cut to the page's before it is written, so a report is
// a few hundred KiB; past this the child is wrong, and is stopped.
const maxSimReport = 16 << 20

// simProcess runs the web UI's what-if replays (webui.Config.Replay), each
// in a child process (`corral sim ... -o json` over the cell's store, named
// by CORRAL_STORE):
// bounded in memory by a cgroup of its own (GOMEMLIMIT where the machine
// has none), in time by --sim-timeout, in its report by maxSimReport, and
// killed with its process group when the viewer leaves. A replay that
// exhausts its memory or will not stop ends only its own process; the
// master, its scheduler and its link never notice.
type simProcess struct {
	self, store string
	limits      simLimits
	log         *slog.Logger
	mgr         cgroup.Manager // nil where the machine offers no cgroups

	mu     sync.Mutex
	byUser map[string]int
	total  int
	n      atomic.Int64 // names each replay's cgroup

	// stop ends every replay (close); running counts those not yet
	// cleaned up after.
	ctx     context.Context
	stop    context.CancelFunc
	running sync.WaitGroup
}

func newSimProcess(store string, limits simLimits, log *slog.Logger) (*simProcess, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding the corral binary to run what-if replays: %w", err)
	}
	p := &simProcess{self: self, store: store, limits: limits, log: log, byUser: map[string]int{}}
	p.ctx, p.stop = context.WithCancel(context.Background())
	mgr, note, err := cgroup.Detect("auto", "corral-sim")
	if err != nil || mgr.Mode() == cgroup.ModeSampling {
		log.Warn("what-if replays run without a cgroup: their memory is bounded by GOMEMLIMIT only", "note", note, "err", err)
	} else {
		p.mgr = mgr
		sweepDeadMasters(mgr, log)
	}
	return p, nil
}

// close stops every replay running (its viewer gets Unavailable) and
// waits, a few seconds at most, until their processes and cgroups are gone.
func (p *simProcess) close() {
	p.stop()
	done := make(chan struct{})
	go func() { p.running.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		p.log.Warn("what-if replays still running 10s after the master stopped them")
	}
}

// sweepDeadMasters removes the empty cgroups, under mgr, of masters that
// are gone (named master-PID..., the PID not running): a master killed
// with SIGKILL leaves its replays' and its Infrastore's cgroups behind,
// and a restart runs under another PID. A cgroup with a process in it is
// never touched.
func sweepDeadMasters(mgr cgroup.Manager, log *slog.Logger) {
	names, err := mgr.List()
	if err != nil {
		return
	}
	swept := 0
	for _, name := range names {
		rest, ok := strings.CutPrefix(name, "master-")
		if !ok {
			continue
		}
		pid, err := strconv.Atoi(strings.SplitN(rest, "-", 2)[0])
		if err != nil || pid <= 0 || pid == os.Getpid() || processAlive(pid) {
			continue
		}
		c, err := mgr.Open(name)
		if err != nil {
			continue
		}
		if pids, err := c.Pids(); err != nil || len(pids) > 0 {
			continue
		}
		if c.Destroy() == nil {
			swept++
		}
	}
	if swept > 0 {
		log.Info("removed the empty cgroups of masters that are gone", "cgroups", swept)
	}
}

// processAlive reports whether pid names a process (one of another user's
// too).
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// take holds a slot for user's replay, or refuses naming the cap.
func (p *simProcess) take(user string) (release func(), err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.byUser[user] >= p.limits.perUser {
		return nil, status.Errorf(codes.ResourceExhausted, "%s runs %d what-if replays, the most one user may run at once (--sim-per-user %d): wait for it to finish",
			user, p.byUser[user], p.limits.perUser)
	}
	if p.total >= p.limits.total {
		return nil, status.Errorf(codes.ResourceExhausted, "the cell runs %d what-if replays, the most at once (--sim-concurrency %d): retry shortly", p.total, p.limits.total)
	}
	p.byUser[user]++
	p.total++
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.total--
			if p.byUser[user]--; p.byUser[user] <= 0 {
				delete(p.byUser, user)
			}
		})
	}, nil
}

// Replay runs r in a child process (webui.Config.Replay).
func (p *simProcess) Replay(ctx context.Context, r webui.ReplayRequest) (*fauxmaster.Report, error) {
	if _, err := fauxmaster.ParseChange(r.Change); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	release, err := p.take(r.User)
	if err != nil {
		return nil, err
	}
	defer release()
	p.running.Add(1)
	defer p.running.Done()
	ctx, cancel := context.WithTimeout(ctx, p.limits.timeout)
	defer cancel()
	defer context.AfterFunc(p.ctx, cancel)()

	args := append([]string{"sim", "--from", strconv.FormatInt(r.From, 10), "--to", strconv.FormatInt(r.To, 10),
		"-o", "json", "--differences", strconv.Itoa(webui.SimDifferences)}, r.Change.Flags()...)
	cmd := exec.Command(p.self, args...)
	// The child's heap gives way to the collector before the cgroup's
	// limit (or, without one, is the only bound).
	// The store's URL may hold a password: in the environment, not argv,
	// which every user of the machine may read.
	cmd.Env = append(os.Environ(), "CORRAL_STORE="+p.store, "GOMEMLIMIT="+strconv.FormatInt(p.limits.memoryBytes/10*8, 10))
	var cg cgroup.Container
	if p.mgr != nil {
		name := fmt.Sprintf("master-%d-sim-%d", os.Getpid(), p.n.Add(1))
		if cg, err = p.mgr.Create(name, cgroup.Limits{MemoryBytes: p.limits.memoryBytes}); err != nil {
			return nil, status.Errorf(codes.Unavailable, "making the what-if replay's cgroup: %v", err)
		}
		defer func() { _ = cg.Destroy() }()
		cmd.Env = append(cmd.Env, "CORRAL_CGROUP_JOIN="+strings.Join(cg.JoinFiles(), string(os.PathListSeparator)))
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &limitedWriter{w: &stdout, left: maxSimReport}
	cmd.Stderr = &limitedWriter{w: &stderr, left: 64 << 10}
	// The child dies with the master, even by SIGKILL, and takes its
	// group along when it is stopped.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, status.Errorf(codes.Unavailable, "starting the what-if replay: %v", err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	var runErr error
	select {
	case runErr = <-waited:
	case <-ctx.Done():
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-waited
		return nil, p.stopped(ctx, r, time.Since(start).Round(time.Millisecond))
	}
	var peak int64
	var oom bool
	if cg != nil {
		if st, err := cg.Stats(); err == nil {
			peak, oom = st.MemoryPeakBytes, st.OOMKills > 0
		}
	}
	p.log.Info("what-if replay", "user", r.User, "from", r.From, "to", r.To, "took", time.Since(start).Round(time.Millisecond), "peak_bytes", peak, "err", runErr)
	if runErr != nil {
		return nil, p.failed(runErr, strings.TrimSpace(stderr.String()), oom, cg != nil)
	}
	if stdout.Len() >= maxSimReport {
		return nil, status.Errorf(codes.Internal, "the what-if replay's report passed %s", projections.FormatBytes(maxSimReport))
	}
	var rep fauxmaster.Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		return nil, status.Errorf(codes.Internal, "reading the what-if replay's report: %v", err)
	}
	return &rep, nil
}

// stopped says why a replay whose ctx ended was stopped after took: the
// master stopping, its time limit, or its viewer leaving.
func (p *simProcess) stopped(ctx context.Context, r webui.ReplayRequest, took time.Duration) error {
	switch {
	case p.ctx.Err() != nil:
		p.log.Info("what-if replay stopped with the master", "user", r.User, "took", took)
		return status.Error(codes.Unavailable, "the master is stopping: retry the replay when it is back")
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		p.log.Info("what-if replay past its time", "user", r.User, "from", r.From, "to", r.To, "took", took, "limit", p.limits.timeout)
		return status.Errorf(codes.DeadlineExceeded, "the replay ran past its time limit (%s, --sim-timeout): replay a shorter window (from, to)", p.limits.timeout)
	}
	p.log.Info("what-if replay stopped: its viewer left", "user", r.User, "took", took)
	return status.FromContextError(ctx.Err()).Err()
}

// failed says why a replay's process ended in runErr, given what it wrote
// to stderr (msg), whether its cgroup saw an OOM kill, and whether it had
// a cgroup.
func (p *simProcess) failed(runErr error, msg string, oom, inCgroup bool) error {
	var ee *exec.ExitError
	killed := errors.As(runErr, &ee) && ee.Sys().(syscall.WaitStatus).Signaled() && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL
	switch {
	// Killed where its cgroup saw no OOM: by someone, not its memory.
	// Without a cgroup a SIGKILL is most likely the kernel's OOM killer.
	case oom || killed && !inCgroup || strings.Contains(msg, "out of memory"):
		return status.Errorf(codes.OutOfRange, "the replay needed more than its memory (%s, --sim-memory): replay a shorter window or add fewer machines",
			projections.FormatBytes(p.limits.memoryBytes))
	case killed:
		return status.Error(codes.Unavailable, "the replay's process was killed before it finished (not at its memory): retry")
	case errors.As(runErr, &ee) && ee.ExitCode() == ExitUsage:
		return status.Error(codes.InvalidArgument, strings.TrimPrefix(errorLine(msg), "corral: "))
	}
	return status.Errorf(codes.Internal, "the what-if replay failed: %v: %s", runErr, errorLine(msg))
}

// limitedWriter keeps the first left bytes and drops the rest (a child
// writing more is not stopped by its pipe filling).
type limitedWriter struct {
	w    io.Writer
	left int64
}

func (l *limitedWriter) Write(b []byte) (int, error) {
	n := len(b)
	if l.left > 0 {
		keep := b[:min(int64(len(b)), l.left)]
		_, _ = l.w.Write(keep)
		l.left -= int64(len(keep))
	}
	return n, nil
}

// errorLine is the line of a corral command's stderr that says what went
// wrong (the last "corral: " line; a usage hint follows it), else its last
// line.
func errorLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], "corral: ") {
			return lines[i]
		}
	}
	return lines[len(lines)-1]
}
