package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/corralhq/corral/agent/cgroup"
	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/commands/auth"
	"github.com/corralhq/corral/projections"
)

// infraLimits bound the Infrastore process and each query it answers.
type infraLimits struct {
	memoryBytes    int64         // the process's cgroup limit; DuckDB gets 3/4 of it
	threads        int           // DuckDB's worker threads
	maxRows        int           // rows per result
	maxResultBytes int64         // bytes of values per result
	queryTimeout   time.Duration // default and longest query
}

func (l *infraLimits) defaults() {
	if l.memoryBytes <= 0 {
		l.memoryBytes = 2 << 30
	}
	if l.threads <= 0 {
		l.threads = 2
	}
	if l.maxRows <= 0 {
		l.maxRows = 10_000
	}
	if l.maxResultBytes <= 0 {
		l.maxResultBytes = 16 << 20
	}
	if l.queryTimeout <= 0 {
		l.queryTimeout = 30 * time.Second
	}
}

// infraFlags are the query limits' flags of `corral master` and `corral up`.
type infraFlags struct {
	memory, maxBytes string
	limits           infraLimits
}

func (f *infraFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&f.memory, "infra-memory", "2GiB", "memory of the Infrastore process that answers SQL and bills (its cgroup; DuckDB gets 3/4)")
	fs.IntVar(&f.limits.threads, "infra-threads", 2, "DuckDB worker threads of the Infrastore process")
	fs.IntVar(&f.limits.maxRows, "query-max-rows", 10_000, "most rows a query returns; the rest are dropped and the reply says so")
	fs.StringVar(&f.maxBytes, "query-max-bytes", "16MiB", "most bytes of values a query returns; past it the reply is cut and says so")
	fs.DurationVar(&f.limits.queryTimeout, "query-timeout", 30*time.Second, "default and longest time of a query")
}

// resolve checks the flags and returns the limits.
func (f *infraFlags) resolve() (infraLimits, error) {
	l := f.limits
	n, err := commands.ParseBytes(f.memory)
	if err != nil {
		return l, usageErr("--infra-memory %q: %v", f.memory, err)
	}
	if l.maxResultBytes, err = commands.ParseBytes(f.maxBytes); err != nil {
		return l, usageErr("--query-max-bytes %q: %v", f.maxBytes, err)
	}
	switch {
	case n < 256<<20:
		return l, usageErr("--infra-memory %s: at least 256MiB", f.memory)
	case l.threads < 1 || l.threads > 256:
		return l, usageErr("--infra-threads %d: between 1 and 256", l.threads)
	case l.maxRows < 1 || l.maxRows > 10_000_000:
		return l, usageErr("--query-max-rows %d: between 1 and 10000000", l.maxRows)
	case l.maxResultBytes < 1<<10 || l.maxResultBytes > auth.MaxReplyMsgSize:
		return l, usageErr("--query-max-bytes %s: between 1KiB and %s (the most a reply of the cell's API may carry)", f.maxBytes, projections.FormatBytes(auth.MaxReplyMsgSize))
	case l.queryTimeout < time.Second || l.queryTimeout > time.Hour:
		return l, usageErr("--query-timeout %s: between 1s and 1h", l.queryTimeout)
	}
	l.memoryBytes = n
	return l, nil
}

// duckDBMemory is DuckDB's memory_limit inside a process limited to
// total: the rest is Go's heap, the reply being built and gRPC buffers.
func duckDBMemory(total int64) string {
	return strconv.FormatInt(total/4*3/(1<<20), 10) + "MiB"
}

// queryGrace is how long past its time limit a query may take to stop
// before the Infrastore process exits (and is restarted) rather than let
// it run on.
const queryGrace = 15 * time.Second

// infraProcess runs the Infrastore in a child process (`corral infrastore
// serve`) and answers the master's Query and Bill through it, over a
// unix socket. User SQL never runs in the master's process: a query that
// exhausts memory or will not stop kills only the child, which is
// restarted; the master, scheduler, agents and DNS do not notice.
type infraProcess struct {
	self, db, store, cell string
	limits                infraLimits
	log                   *slog.Logger

	// The socket is the Infrastore file's name plus ".sock", beside it:
	// under the data dir, so a master killed with SIGKILL leaves nothing
	// elsewhere (the next start replaces it). sock is the path the child
	// binds, dialSock the one the master dials: both the file's path, or,
	// when that is longer than a unix socket path may be, paths through
	// dirFD (the directory, held open), /proc/self/fd/3/NAME in the child
	// (where it is fd 3) and /proc/self/fd/N/NAME here.
	sock, dialSock string
	dirFD          *os.File         // nil when the path is short enough
	cg             cgroup.Container // nil where the machine offers no cgroups
	conn           *grpc.ClientConn
	client         apipb.CellClient

	starts atomic.Int64
	pid    atomic.Int64
	done   chan struct{}
}

// startInfraProcess starts the supervisor; the child is (re)started until
// ctx ends.
func startInfraProcess(ctx context.Context, db, store, cell string, limits infraLimits, log *slog.Logger) (*infraProcess, error) {
	limits.defaults()
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding the corral binary to run the Infrastore: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(db), 0o755); err != nil {
		return nil, err
	}
	p := &infraProcess{self: self, db: db, store: store, cell: cell, limits: limits, log: log, done: make(chan struct{})}
	if err := p.placeSocket(); err != nil {
		return nil, err
	}
	p.cg = p.container()
	p.conn, err = grpc.NewClient("unix://"+p.dialSock, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(auth.MaxReplyMsgSize)))
	if err != nil {
		p.freeSocket()
		return nil, err
	}
	p.client = apipb.NewCellClient(p.conn)
	go p.supervise(ctx)
	return p, nil
}

// container makes the child's cgroup where the machine allows: its own,
// named for this master process, under corral-infrastore.
func (p *infraProcess) container() cgroup.Container {
	mgr, note, err := cgroup.Detect("auto", "corral-infrastore")
	if err != nil || mgr.Mode() == cgroup.ModeSampling {
		p.log.Warn("the Infrastore process runs without a cgroup: its memory is bounded by DuckDB's memory_limit only", "note", note, "err", err)
		return nil
	}
	sweepDeadMasters(mgr, p.log)
	c, err := mgr.Create(fmt.Sprintf("master-%d", os.Getpid()), cgroup.Limits{MemoryBytes: p.limits.memoryBytes})
	if err != nil {
		p.log.Warn("the Infrastore process runs without a cgroup", "err", err)
		return nil
	}
	return c
}

// maxSocketPath is the longest path a unix socket may be bound at on
// Linux (sun_path is 108 bytes, with its NUL).
const maxSocketPath = 107

// placeSocket sets sock and dialSock: the socket beside the Infrastore's
// file, only this user may connect to it (the child makes it 0600).
func (p *infraProcess) placeSocket() error {
	abs, err := filepath.Abs(p.db + ".sock")
	if err != nil {
		return err
	}
	if len(abs) <= maxSocketPath {
		p.sock, p.dialSock = abs, abs
		return nil
	}
	// Too long for a socket address: name it through the directory's
	// descriptor, which the kernel resolves as the directory itself.
	if p.dirFD, err = os.Open(filepath.Dir(abs)); err != nil {
		return err
	}
	name := filepath.Base(abs)
	if len("/proc/self/fd/"+strconv.Itoa(int(p.dirFD.Fd()))+"/"+name) > maxSocketPath {
		p.dirFD.Close()
		return fmt.Errorf("the Infrastore's file name %s is too long for its socket: at most %d bytes", name, maxSocketPath-30)
	}
	p.sock = "/proc/self/fd/3/" + name
	p.dialSock = "/proc/self/fd/" + strconv.Itoa(int(p.dirFD.Fd())) + "/" + name
	return nil
}

// freeSocket removes the socket and closes the directory's descriptor.
func (p *infraProcess) freeSocket() {
	_ = os.Remove(p.dialSock)
	if p.dirFD != nil {
		p.dirFD.Close()
	}
}

func (p *infraProcess) args() []string {
	return []string{"infrastore", "serve", "--db", p.db, "--socket", p.sock,
		"--cell", p.cell, "--memory-limit", duckDBMemory(p.limits.memoryBytes), "--threads", strconv.Itoa(p.limits.threads),
		"--max-rows", strconv.Itoa(p.limits.maxRows), "--max-result-bytes", strconv.FormatInt(p.limits.maxResultBytes, 10),
		"--query-timeout", p.limits.queryTimeout.String(), "--memory-budget", strconv.FormatInt(p.limits.memoryBytes, 10)}
}

// supervise runs the child until ctx ends, restarting it with backoff
// (0.5 s doubling to 30 s, back to 0.5 s after a minute up).
func (p *infraProcess) supervise(ctx context.Context) {
	defer close(p.done)
	backoff := 500 * time.Millisecond
	for ctx.Err() == nil {
		start := time.Now()
		err := p.runOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		if time.Since(start) > time.Minute {
			backoff = 500 * time.Millisecond
		}
		p.log.Warn("the Infrastore process exited; restarting it (the cell runs on; SQL and bills wait)", "err", err, "restart_in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 30*time.Second)
	}
}

func (p *infraProcess) runOnce(ctx context.Context) error {
	cmd := exec.Command(p.self, p.args()...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	// The store's URL may hold a password: in the environment, not argv,
	// which every user of the machine may read.
	cmd.Env = append(os.Environ(), "CORRAL_STORE="+p.store)
	if p.dirFD != nil {
		cmd.ExtraFiles = []*os.File{p.dirFD} // fd 3, as sock names it
	}
	if p.cg != nil {
		cmd.Env = append(cmd.Env, "CORRAL_CGROUP_JOIN="+strings.Join(p.cg.JoinFiles(), string(os.PathListSeparator)))
	}
	// The child dies with the master, even by SIGKILL.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	p.starts.Add(1)
	p.pid.Store(int64(cmd.Process.Pid))
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case err := <-waited:
		return err
	case <-ctx.Done():
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-waited:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-waited
		}
		return ctx.Err()
	}
}

// unavailable words a failed call to the child for the user.
func (p *infraProcess) unavailable(err error) error {
	if s, ok := status.FromError(err); ok && s.Code() != codes.Unavailable && s.Code() != codes.Unknown {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return status.Errorf(codes.Unavailable, "the Infrastore process is not answering (restarted %d times; it restarts after a query exhausts its memory or will not stop): retry shortly", max(p.starts.Load()-1, 0))
}

// Query answers through the child (api.Analytics).
func (p *infraProcess) Query(ctx context.Context, r *apipb.QueryRequest) (*apipb.QueryReply, error) {
	out, err := p.client.Query(ctx, r)
	if err != nil {
		return nil, p.unavailable(err)
	}
	return out, nil
}

// Bill answers through the child (api.Analytics).
func (p *infraProcess) Bill(ctx context.Context, r *apipb.BillRequest) (*apipb.BillReply, error) {
	out, err := p.client.Bill(ctx, r)
	if err != nil {
		return nil, p.unavailable(err)
	}
	return out, nil
}

// Costs answers through the child (api.Analytics).
func (p *infraProcess) Costs(ctx context.Context, r *apipb.CostsRequest) (*apipb.CostsReply, error) {
	out, err := p.client.Costs(ctx, r)
	if err != nil {
		return nil, p.unavailable(err)
	}
	return out, nil
}

// ExportBill streams a bill from the child (api.Analytics).
func (p *infraProcess) ExportBill(ctx context.Context, r *apipb.BillRequest, send func([]byte) error) error {
	stream, err := p.client.ExportBill(ctx, r)
	if err != nil {
		return p.unavailable(err)
	}
	for {
		chunk, err := stream.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return p.unavailable(err)
		}
		if err := send(chunk.Data); err != nil {
			return err
		}
	}
}

// Position is the position the child has ingested.
func (p *infraProcess) Position(ctx context.Context) (int64, error) {
	out, err := p.client.Query(ctx, &apipb.QueryRequest{Sql: "SELECT 1", TimeoutMs: 2000})
	if err != nil {
		return 0, err
	}
	return out.Position, nil
}

// wait waits for the supervisor to stop (after its ctx ended), then frees
// the socket and the cgroup.
func (p *infraProcess) wait() {
	<-p.done
	p.conn.Close()
	p.freeSocket()
	if p.cg != nil {
		_ = p.cg.Destroy()
	}
}

// joinCgroup puts this process into the cgroup its supervisor made, before
// it opens anything.
func joinCgroup() error {
	files := os.Getenv("CORRAL_CGROUP_JOIN")
	if files == "" {
		return nil
	}
	for _, f := range filepath.SplitList(files) {
		if err := os.WriteFile(f, []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
			return fmt.Errorf("joining the cgroup %s: %w", f, err)
		}
	}
	return nil
}

// infraServer is the child's gRPC service: Query and Bill of the
// Infrastore it holds, each under a watchdog.
type infraServer struct {
	apipb.UnimplementedCellServer
	inf     Infra
	timeout time.Duration
	log     *slog.Logger
}

// watchdog exits the process when a call outlives its time limit by
// queryGrace: DuckDB could not interrupt it, and only a restart frees what
// it holds.
func (s *infraServer) watchdog(what string) func() bool {
	t := time.AfterFunc(s.timeout+queryGrace, func() {
		s.log.Error("a call did not stop within its time limit; exiting so the Infrastore process restarts", "call", what, "limit", s.timeout)
		os.Exit(3)
	})
	return t.Stop
}

func (s *infraServer) Query(ctx context.Context, r *apipb.QueryRequest) (*apipb.QueryReply, error) {
	defer s.watchdog("query")()
	return s.inf.Query(ctx, r)
}

// exportLimit bounds one export: a month of a large cell takes seconds,
// and a stuck one must not hold the process.
const exportLimit = 10 * time.Minute

func (s *infraServer) ExportBill(r *apipb.BillRequest, stream apipb.Cell_ExportBillServer) error {
	ctx, cancel := context.WithTimeout(stream.Context(), exportLimit)
	defer cancel()
	return s.inf.ExportBill(ctx, r, func(b []byte) error { return stream.Send(&apipb.BillChunk{Data: b}) })
}

func (s *infraServer) Costs(ctx context.Context, r *apipb.CostsRequest) (*apipb.CostsReply, error) {
	defer s.watchdog("costs")()
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	return s.inf.Costs(ctx, r)
}

func (s *infraServer) Bill(ctx context.Context, r *apipb.BillRequest) (*apipb.BillReply, error) {
	defer s.watchdog("bill")()
	return s.inf.Bill(ctx, r)
}
