package ops

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/corralhq/corral/commands/apipb"
)

// DoctorConfig says what `corral doctor` examines. Only Masters is
// required; what is not given is not checked, and the report says so.
type DoctorConfig struct {
	// Masters are gRPC addresses of the cell's masters (any of them: the
	// doctor finds the leader).
	Masters []string
	// User the API calls act as.
	User string
	// DialOptions for the masters; default plaintext.
	DialOptions []grpc.DialOption
	// Store is the event log's URL (postgres://..., cockroachdb://... or
	// a SQLite file). When set, the doctor reads it directly: reachable,
	// migration version, the leader lease. It never writes to it.
	Store string
	// DataDir is checked for free space (a master's or `corral up`'s data
	// directory, holding the SQLite log, the Infrastore, the sandboxes).
	DataDir string
	// MinFreeBytes and MinFreeRatio: less free space fails (default 1 GiB
	// and 5%).
	MinFreeBytes int64
	MinFreeRatio float64
	// MaxSkew is the largest clock skew between the master and an agent
	// that passes (default 1 s).
	MaxSkew time.Duration
	// MaxPollAge: an agent not polled for longer fails (default 30 s).
	MaxPollAge time.Duration
	// MaxInfraLag is how many events the Infrastore may trail the head
	// (default 10,000).
	MaxInfraLag int64
	// Timeout bounds each remote call (default 5 s).
	Timeout time.Duration
	// Now is the doctor's clock (default time.Now).
	Now func() time.Time
}

// Severity of a finding.
type Severity int

const (
	OK   Severity = iota
	Skip          // not checked: the doctor was not given what it needs
	Warn          // works, but worth knowing
	Fail          // something is wrong: the doctor exits non-zero
)

func (s Severity) String() string {
	return [...]string{"ok", "skip", "warn", "FAIL"}[s]
}

// MarshalText names the severity in JSON and YAML reports.
func (s Severity) MarshalText() ([]byte, error) {
	return []byte([...]string{"ok", "skip", "warn", "fail"}[s]), nil
}

// Finding is the outcome of one check, in plain words.
type Finding struct {
	Check    string   `json:"check"`
	Severity Severity `json:"severity"`
	Summary  string   `json:"summary"`           // what the doctor found
	Details  []string `json:"details,omitempty"` // one line each: per machine, per master
	Fix      string   `json:"fix,omitempty"`     // what to do, for Warn and Fail
}

// Report is every finding of a doctor run, in the order checked.
type Report struct {
	Findings []Finding `json:"findings"`
}

// OK reports whether no check failed.
func (r *Report) OK() bool {
	for _, f := range r.Findings {
		if f.Severity == Fail {
			return false
		}
	}
	return true
}

// Find returns the finding of a check.
func (r *Report) Find(check string) (Finding, bool) {
	for _, f := range r.Findings {
		if f.Check == check {
			return f, true
		}
	}
	return Finding{}, false
}

// Write prints the report for people.
func (r *Report) Write(w io.Writer) {
	failed, warned := 0, 0
	width := 0
	for _, f := range r.Findings {
		width = max(width, len(f.Check))
		switch f.Severity {
		case Fail:
			failed++
		case Warn:
			warned++
		}
	}
	pad := strings.Repeat(" ", 8+width)
	for _, f := range r.Findings {
		fmt.Fprintf(w, "%-4s  %-*s  %s\n", f.Severity, width, f.Check, f.Summary)
		for _, d := range f.Details {
			fmt.Fprintf(w, "%s  %s\n", pad, d)
		}
		if f.Fix != "" && (f.Severity == Fail || f.Severity == Warn) {
			fmt.Fprintf(w, "%s  fix: %s\n", pad, f.Fix)
		}
	}
	switch {
	case failed > 0:
		fmt.Fprintf(w, "\n%d of %d checks failed", failed, len(r.Findings))
		if warned > 0 {
			fmt.Fprintf(w, ", %d warned", warned)
		}
		fmt.Fprintln(w, ": see the fixes above.")
	case warned > 0:
		fmt.Fprintf(w, "\nNothing is wrong; %d warning(s) above.\n", warned)
	default:
		fmt.Fprintln(w, "\nThe cell is healthy.")
	}
}

type doctor struct {
	cfg    DoctorConfig
	rep    *Report
	now    time.Time
	status map[string]*apipb.StatusReply // by address, of the masters that answered
	errs   map[string]error              // by address, of those that did not
	leader apipb.CellClient              // nil when no leader answered
	lAddr  string
	lReply *apipb.StatusReply
	store  *storeProbe
	conns  []*grpc.ClientConn
}

func (d *doctor) add(f Finding) { d.rep.Findings = append(d.rep.Findings, f) }

func (d *doctor) ctx(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(parent, d.cfg.Timeout)
	return metadata.AppendToOutgoingContext(ctx, "x-corral-user", d.cfg.User), cancel
}

// Doctor runs every check and returns the report; it never changes the
// cell. The caller exits non-zero unless the report is OK.
func Doctor(ctx context.Context, cfg DoctorConfig) *Report {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.MaxSkew <= 0 {
		cfg.MaxSkew = time.Second
	}
	if cfg.MaxPollAge <= 0 {
		cfg.MaxPollAge = 30 * time.Second
	}
	if cfg.MaxInfraLag <= 0 {
		cfg.MaxInfraLag = 10_000
	}
	if cfg.MinFreeBytes <= 0 {
		cfg.MinFreeBytes = 1 << 30
	}
	if cfg.MinFreeRatio <= 0 {
		cfg.MinFreeRatio = 0.05
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.User == "" {
		cfg.User = "doctor"
	}
	if len(cfg.DialOptions) == 0 {
		cfg.DialOptions = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	d := &doctor{cfg: cfg, rep: &Report{}, now: cfg.Now(), status: map[string]*apipb.StatusReply{}, errs: map[string]error{}}
	defer func() {
		for _, c := range d.conns {
			c.Close()
		}
	}()
	if cfg.Store != "" {
		d.store = probeStore(ctx, cfg.Store, cfg.Timeout)
	}
	d.checkMasters(ctx)
	d.checkStore()
	d.checkMigrations()
	d.checkLeader()
	list := d.machines(ctx)
	machines := list.GetMachines()
	d.checkAgents(machines)
	d.checkLossHold(list)
	d.checkClocks(machines)
	d.checkCgroups(machines)
	d.checkTasks(ctx)
	d.checkInfrastore(ctx)
	d.checkDisk()
	return d.rep
}

func (d *doctor) dial(addr string) (apipb.CellClient, error) {
	conn, err := grpc.NewClient(addr, d.cfg.DialOptions...)
	if err != nil {
		return nil, err
	}
	d.conns = append(d.conns, conn)
	return apipb.NewCellClient(conn), nil
}

// checkMasters asks every master its status, and finds the leader.
