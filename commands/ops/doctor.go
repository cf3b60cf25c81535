package ops

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/corralhq/corral/agent/cgroup"
	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/events/pgstore"
	"github.com/corralhq/corral/events/storeopen"
	"github.com/corralhq/corral/migrations"
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
	machines := d.machines(ctx)
	d.checkAgents(machines)
	d.checkClocks(machines)
	d.checkCgroups(machines)
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
func (d *doctor) checkMasters(ctx context.Context) {
	f := Finding{Check: "masters"}
	if len(d.cfg.Masters) == 0 {
		f.Severity, f.Summary = Fail, "no master address given"
		f.Fix = "give --master (or set CORRAL_MASTER) to the cell's masters' gRPC addresses"
		d.add(f)
		return
	}
	for _, addr := range d.cfg.Masters {
		c, err := d.dial(addr)
		var st *apipb.StatusReply
		if err == nil {
			cctx, cancel := d.ctx(ctx)
			st, err = c.Status(cctx, &apipb.StatusRequest{})
			cancel()
		}
		if err != nil {
			d.errs[addr] = err
			f.Details = append(f.Details, fmt.Sprintf("%s: does not answer: %s", addr, grpcMessage(err)))
			continue
		}
		d.status[addr] = st
		role := "follower"
		if st.Leader {
			role = "leader"
			d.leader, d.lAddr, d.lReply = c, addr, st
		}
		f.Details = append(f.Details, fmt.Sprintf("%s: master %q, %s, applied position %d%s", addr, st.Master, role, st.Position, ofHead(st)))
	}
	// The leader may be a master the doctor was not told of.
	if d.leader == nil {
		for _, st := range d.status {
			if st.LeaderAddress == "" || d.status[st.LeaderAddress] != nil {
				continue
			}
			c, err := d.dial(st.LeaderAddress)
			if err != nil {
				continue
			}
			cctx, cancel := d.ctx(ctx)
			lst, err := c.Status(cctx, &apipb.StatusRequest{})
			cancel()
			if err == nil && lst.Leader {
				d.leader, d.lAddr, d.lReply = c, st.LeaderAddress, lst
				d.status[st.LeaderAddress] = lst
				f.Details = append(f.Details, fmt.Sprintf("%s: master %q, leader (named by the others), applied position %d%s", st.LeaderAddress, lst.Master, lst.Position, ofHead(lst)))
			}
			break
		}
	}
	switch {
	case len(d.status) == 0:
		f.Severity = Fail
		f.Summary = fmt.Sprintf("no master answers at %s", strings.Join(d.cfg.Masters, ", "))
		f.Fix = "start the cell (`corral up`, or `corral master` on each master host), or point --master (CORRAL_MASTER) at its gRPC address"
	case len(d.errs) > 0:
		f.Severity = Fail
		f.Summary = fmt.Sprintf("%d of %d masters answer", len(d.status), len(d.status)+len(d.errs))
		f.Fix = "restart the masters that do not answer (`corral master ...`), or drop their addresses from --master if they were removed"
	default:
		f.Summary = fmt.Sprintf("%d master(s) answer", len(d.status))
	}
	d.add(f)
}

// ofHead says where the log's head is, as a master read it.
func ofHead(st *apipb.StatusReply) string {
	if st.StoreError != "" {
		return " (the log's head is unknown)"
	}
	return fmt.Sprintf(" of %d", st.Head)
}

func grpcMessage(err error) string {
	if s, ok := status.FromError(err); ok {
		return s.Message()
	}
	return err.Error()
}

// checkStore: the masters read the log, and the doctor can too.
func (d *doctor) checkStore() {
	f := Finding{Check: "store"}
	var broken []string
	for _, addr := range sortedKeys(d.status) {
		st := d.status[addr]
		if st.StoreError != "" {
			broken = append(broken, st.Master)
			f.Details = append(f.Details, fmt.Sprintf("master %q cannot read the event log: %s", st.Master, st.StoreError))
		} else {
			f.Details = append(f.Details, fmt.Sprintf("master %q reads the event log (%s): head at %d", st.Master, st.Store, st.Head))
		}
	}
	if p := d.store; p != nil {
		if p.err != nil {
			f.Details = append(f.Details, fmt.Sprintf("the doctor cannot read %s: %v", redact(d.cfg.Store), p.err))
		} else {
			f.Details = append(f.Details, fmt.Sprintf("the doctor reads %s: head at %d", redact(d.cfg.Store), p.head))
		}
	}
	switch {
	case len(broken) > 0 || (d.store != nil && d.store.err != nil):
		f.Severity = Fail
		if len(broken) > 0 {
			f.Summary = fmt.Sprintf("the event log is unreachable from master(s) %s", strings.Join(broken, ", "))
		} else {
			f.Summary = "the event log is unreachable from here"
		}
		f.Fix = "start the database the masters' --store names (PostgreSQL: `pg_ctlcluster <version> main start`; CockroachDB: start its nodes) and check the URL, its credentials and the network path; the masters retry on their own once it answers"
	case len(d.status) == 0 && d.store == nil:
		f.Severity, f.Summary = Skip, "not checked: no master answered and no --store was given"
	case len(d.status) == 0:
		f.Summary = "the doctor reads the event log"
	default:
		f.Summary = "the event log answers"
	}
	d.add(f)
}

func (d *doctor) checkMigrations() {
	f := Finding{Check: "migrations"}
	switch p := d.store; {
	case p == nil:
		f.Severity, f.Summary = Skip, "not checked: give --store (the event log's URL) to read its migration version"
	case p.err != nil:
		f.Severity, f.Summary = Fail, "not checked: the event log is unreachable (see store)"
		f.Fix = "make the store reachable, then run the doctor again"
	case p.versionErr != nil:
		f.Severity = Fail
		f.Summary = fmt.Sprintf("no migration version: %v", p.versionErr)
		f.Fix = fmt.Sprintf("apply the schema: `corral migrate up --store %s` (masters also do it when they start)", redact(d.cfg.Store))
	case p.dirty:
		f.Severity = Fail
		f.Summary = fmt.Sprintf("migration %d failed half-way (schema_migrations is dirty)", p.version)
		f.Fix = fmt.Sprintf("read the failed migration %06d in migrations/%s, repair the schema by hand, then clear the flag: UPDATE schema_migrations SET dirty = false", p.version, p.flavor)
	case p.version < p.latest:
		f.Severity = Fail
		f.Summary = fmt.Sprintf("the schema is at migration %d; this corral expects %d", p.version, p.latest)
		f.Fix = fmt.Sprintf("run `corral migrate up --store %s` (masters also apply migrations when they start)", redact(d.cfg.Store))
	case p.version > p.latest:
		f.Severity = Warn
		f.Summary = fmt.Sprintf("the schema is at migration %d, newer than this corral's %d", p.version, p.latest)
		f.Fix = "upgrade this corral binary to the masters' version"
	default:
		f.Summary = fmt.Sprintf("the schema is at migration %d, the latest", p.version)
	}
	d.add(f)
}

func (d *doctor) checkLeader() {
	f := Finding{Check: "leader"}
	var named string
	for _, st := range d.status {
		if st.LeaderName != "" {
			named = st.LeaderName
		}
	}
	if p := d.store; p != nil && p.err == nil && p.leaseOK {
		state := "held until " + p.lease.ExpiresAt.Local().Format(time.RFC3339)
		switch {
		case p.lease.ExpiresAt.Unix() <= 0:
			state = "released"
		case d.now.After(p.lease.ExpiresAt):
			state = "expired at " + p.lease.ExpiresAt.Local().Format(time.RFC3339)
		}
		f.Details = append(f.Details, fmt.Sprintf("the lease in the store: %s, epoch %d, %s", p.lease.Holder, p.lease.Epoch, state))
	}
	switch {
	case d.lReply != nil:
		st := d.lReply
		f.Summary = fmt.Sprintf("%s leads (epoch %d) at %s", st.Master, st.Epoch, d.lAddr)
		if st.StoreError != "" {
			f.Details = append(f.Details, "it cannot renew its lease while the event log is unreachable: it stops leading when the lease expires, and no master leads until the log answers again")
		}
		if st.LeaderSinceUs != 0 {
			since := time.UnixMicro(st.LeaderSinceUs)
			f.Summary += fmt.Sprintf(", since %s (%s ago)", since.Local().Format(time.RFC3339), d.now.Sub(since).Round(time.Second))
		}
	case len(d.status) == 0 && d.store != nil && d.store.err == nil && d.store.leaseOK && d.now.Before(d.store.lease.ExpiresAt):
		f.Severity = Fail
		f.Summary = fmt.Sprintf("the lease names %s (epoch %d), but no master answers", d.store.lease.Holder, d.store.lease.Epoch)
		f.Fix = "check that the leader's gRPC address is reachable from here"
	case len(d.status) == 0:
		f.Severity, f.Summary = Skip, "not checked: no master answered"
	default:
		f.Severity = Fail
		f.Summary = "no master leads"
		if named != "" {
			f.Summary += fmt.Sprintf(" (the log's last leader was %s)", named)
		}
		f.Fix = "a master leads only while it can renew its lease in the event log: fix the store if it is unreachable; otherwise look at the masters' logs for \"campaigning\" errors; a new leader is elected within the lease TTL (6 s)"
	}
	d.add(f)
}

// machines lists the machines as the leader (or any master) sees them.
func (d *doctor) machines(ctx context.Context) []*apipb.MachineView {
	c := d.leader
	if c == nil {
		for _, addr := range sortedKeys(d.status) {
			c, _ = d.dial(addr)
			break
		}
	}
	if c == nil {
		return nil
	}
	cctx, cancel := d.ctx(ctx)
	defer cancel()
	ms, err := c.ListMachines(cctx, &apipb.ListMachinesRequest{})
	if err != nil {
		d.add(Finding{Check: "agents", Severity: Fail, Summary: "cannot list the machines: " + grpcMessage(err),
			Fix: "see the masters' logs"})
		return nil
	}
	return ms.Machines
}

func (d *doctor) checkAgents(ms []*apipb.MachineView) {
	if _, done := d.rep.Find("agents"); done {
		return
	}
	f := Finding{Check: "agents"}
	if len(d.status) == 0 {
		f.Severity, f.Summary = Skip, "not checked: no master answered"
		d.add(f)
		return
	}
	if len(ms) == 0 {
		f.Severity, f.Summary = Warn, "no machine is registered: tasks have nowhere to run"
		f.Fix = "start an agent on each machine: `corral agent --master <master:port> --name <machine>` (`corral up` starts its own)"
		d.add(f)
		return
	}
	up, draining := 0, 0
	var bad []string
	for _, m := range ms {
		line := fmt.Sprintf("%s (%s): %s", m.Name, m.Address, m.State)
		if m.Draining {
			line += ", draining"
			draining++
		}
		stale := false
		switch {
		case d.leader == nil:
			line += "; last poll unknown (no leader polls)"
		case m.LastPollUs == 0:
			line += "; not polled yet by this leader"
			stale = m.State != "down"
		default:
			age := d.now.Sub(time.UnixMicro(m.LastPollUs))
			line += fmt.Sprintf("; last poll %s ago", age.Round(100*time.Millisecond))
			if m.MissedPolls > 0 {
				line += fmt.Sprintf(", %d missed since", m.MissedPolls)
			}
			stale = age > d.cfg.MaxPollAge
		}
		if m.Reason != "" {
			line += " (" + m.Reason + ")"
		}
		f.Details = append(f.Details, line)
		if m.State == "up" && !stale {
			up++
		} else {
			bad = append(bad, m.Name)
		}
	}
	f.Summary = fmt.Sprintf("%d of %d machines up", up, len(ms))
	if draining > 0 {
		f.Summary += fmt.Sprintf(" (%d draining)", draining)
	}
	if len(bad) > 0 {
		f.Severity = Fail
		f.Summary += "; not answering: " + strings.Join(bad, ", ")
		f.Fix = "on each machine named, check that `corral agent` runs (restart it: its tasks keep running and are adopted) and that the master can reach its --advertise address"
	}
	d.add(f)
}

func (d *doctor) checkClocks(ms []*apipb.MachineView) {
	f := Finding{Check: "clocks"}
	if d.leader == nil {
		f.Severity, f.Summary = Skip, "not checked: only the leader polls agents and sees their clocks"
		d.add(f)
		return
	}
	var worst time.Duration
	var off []string
	n := 0
	for _, m := range ms {
		if m.LastPollUs == 0 {
			continue
		}
		n++
		skew := time.Duration(m.ClockSkewUs) * time.Microsecond
		worst = max(worst, skew.Abs())
		if skew.Abs() > d.cfg.MaxSkew {
			off = append(off, fmt.Sprintf("%s is %s %s", m.Name, skew.Abs().Round(time.Millisecond), aheadBehind(skew)))
		}
	}
	switch {
	case n == 0:
		f.Severity, f.Summary = Skip, "not checked: no agent has been polled yet"
	case len(off) > 0:
		f.Severity = Fail
		f.Summary = fmt.Sprintf("%d agent clock(s) differ from the master's by more than %s", len(off), d.cfg.MaxSkew)
		f.Details = off
		f.Fix = "run NTP (chrony or systemd-timesyncd) on every machine: task times, usage windows and leases are compared across machines"
	default:
		f.Summary = fmt.Sprintf("the clocks of %d agent(s) are within %s of the master's (worst %s)", n, d.cfg.MaxSkew, worst.Round(time.Millisecond))
	}
	d.add(f)
}

func aheadBehind(skew time.Duration) string {
	if skew > 0 {
		return "ahead"
	}
	return "behind"
}

func (d *doctor) checkCgroups(ms []*apipb.MachineView) {
	f := Finding{Check: "cgroups"}
	var sampling []string
	known := 0
	for _, m := range ms {
		if m.CgroupMode == "" {
			continue
		}
		known++
		line := fmt.Sprintf("%s: cgroup %s", m.Name, m.CgroupMode)
		if m.CgroupNote != "" {
			line += " (" + m.CgroupNote + ")"
		}
		f.Details = append(f.Details, line)
		if m.CgroupMode == "sampling" {
			sampling = append(sampling, m.Name)
		}
	}
	switch {
	case known == 0:
		// The log does not keep what each agent told at registration; only
		// the leader's link hears it. Say what this machine offers.
		f.Summary = "the agents' cgroup modes are unknown here (only the leader's link hears them); this machine: " + localCgroups()
		f.Severity = Skip
	case len(sampling) > 0:
		f.Severity = Warn
		f.Summary = fmt.Sprintf("%d of %d agents run without cgroups: memory limits are enforced by sampling and killing, CPU is not limited", len(sampling), known)
		f.Fix = "run the agents as root on a kernel with cgroup v2 (or v1 with the memory, cpu and cpuacct controllers mounted), or give the agent a delegated cgroup subtree (systemd Delegate=yes)"
	default:
		f.Summary = fmt.Sprintf("all %d agents enforce limits with kernel cgroups", known)
	}
	d.add(f)
}

// localCgroups describes this machine's cgroup filesystems, read-only:
// what an agent started here would find (cgroup.Detect's order: v2 with
// the memory and cpu controllers, else v1 with memory, cpu and cpuacct).
func localCgroups() string {
	mounts, err := cgroup.Mounts()
	if err != nil {
		return "cannot read /proc/self/mountinfo: " + err.Error()
	}
	var parts []string
	var v1 []string
	for _, m := range mounts {
		if m.V2 {
			ctrl, _ := os.ReadFile(filepath.Join(m.Path, "cgroup.controllers"))
			have := strings.Fields(string(ctrl))
			usable := slices.Contains(have, "memory") && slices.Contains(have, "cpu")
			w := "writable"
			if syscall.Access(m.Path, 2) != nil {
				w = "not writable by this user"
				usable = false
			}
			verdict := "usable"
			if !usable {
				verdict = "not usable"
			}
			parts = append(parts, fmt.Sprintf("cgroup v2 at %s (controllers: %s; %s): %s", m.Path, strings.Join(have, " "), w, verdict))
		}
		v1 = append(v1, m.Controllers...)
	}
	if len(v1) > 0 {
		slices.Sort(v1)
		v1 = slices.Compact(v1)
		verdict := "usable"
		for _, c := range []string{"memory", "cpu", "cpuacct"} {
			if !slices.Contains(v1, c) {
				verdict = "not usable (no " + c + ")"
				break
			}
		}
		parts = append(parts, fmt.Sprintf("cgroup v1 controllers %s: %s", strings.Join(v1, ","), verdict))
	}
	if len(parts) == 0 {
		return "no cgroup filesystem mounted: agents here would run in sampling mode"
	}
	return strings.Join(parts, "; ")
}

func (d *doctor) checkInfrastore(ctx context.Context) {
	f := Finding{Check: "infrastore"}
	if d.leader == nil && len(d.status) == 0 {
		f.Severity, f.Summary = Skip, "not checked: no master answered"
		d.add(f)
		return
	}
	c, st := d.leader, d.lReply
	if c == nil {
		for _, addr := range sortedKeys(d.status) {
			c, _ = d.dial(addr)
			st = d.status[addr]
			break
		}
	}
	cctx, cancel := d.ctx(ctx)
	defer cancel()
	reply, err := c.Query(cctx, &apipb.QueryRequest{Sql: "SELECT 1", TimeoutMs: 2000})
	switch {
	case status.Code(err) == codes.Unimplemented:
		f.Severity, f.Summary = Skip, fmt.Sprintf("master %q runs no Infrastore (`corral master --infrastore PATH` keeps one)", st.Master)
	case err != nil:
		f.Severity = Fail
		f.Summary = "the Infrastore does not answer: " + grpcMessage(err)
		f.Fix = "see the master's log for \"Infrastore\"; it is derived data: `corral infrastore rebuild` recreates it from the log"
	case st.StoreError != "":
		f.Summary = fmt.Sprintf("the Infrastore has ingested position %d; its lag is unknown while the log's head cannot be read", reply.Position)
	default:
		lag := st.Head - reply.Position
		f.Summary = fmt.Sprintf("the Infrastore has ingested position %d of %d (%d behind)", reply.Position, st.Head, max(lag, 0))
		if lag > d.cfg.MaxInfraLag {
			f.Severity = Fail
			f.Fix = "see the master's log for \"Infrastore ingestion stopped\"; restart the master to resume ingestion, or rebuild it with `corral infrastore rebuild`"
		}
	}
	d.add(f)
}

func (d *doctor) checkDisk() {
	f := Finding{Check: "disk"}
	if d.cfg.DataDir == "" {
		f.Severity, f.Summary = Skip, "not checked: give --data to check the data directory's free space"
		d.add(f)
		return
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(d.cfg.DataDir, &st); err != nil {
		f.Severity, f.Summary = Fail, fmt.Sprintf("cannot read %s: %v", d.cfg.DataDir, err)
		f.Fix = "check --data: the directory must exist and be readable"
		d.add(f)
		return
	}
	free := int64(st.Bavail) * st.Bsize
	total := int64(st.Blocks) * st.Bsize
	ratio := 0.0
	if total > 0 {
		ratio = float64(free) / float64(total)
	}
	f.Summary = fmt.Sprintf("%s free of %s (%.0f%%) for %s", bytesText(free), bytesText(total), 100*ratio, d.cfg.DataDir)
	if free < d.cfg.MinFreeBytes || ratio < d.cfg.MinFreeRatio {
		f.Severity = Fail
		f.Fix = fmt.Sprintf("free space on %s (old task sandboxes and rotated logs go after RetainEnded; the Infrastore can be rebuilt smaller), or move --data to a larger filesystem; keep at least %s and %.0f%% free",
			d.cfg.DataDir, bytesText(d.cfg.MinFreeBytes), 100*d.cfg.MinFreeRatio)
	}
	d.add(f)
}

func bytesText(b int64) string {
	const unit = 1024
	if b < unit {
		return fmt.Sprintf("%d B", b)
	}
	div, exp := int64(unit), 0
	for n := b / unit; n >= unit; n /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(b)/float64(div), "KMGTPE"[exp])
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// redact hides a password in a store URL.
func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "***")
		return strings.Replace(u.String(), "%2A%2A%2A", "***", 1)
	}
	return s
}

// storeProbe is what the doctor read from the store directly.
type storeProbe struct {
	err        error // the store does not answer
	head       int64
	lease      events.Lease
	leaseOK    bool
	version    uint
	dirty      bool
	versionErr error
	latest     uint
	flavor     migrations.Flavor
}

// probeStore reads the store without writing to it: PostgreSQL and
// CockroachDB through pgstore (which does not migrate on Open), a SQLite
// file read-only.
func probeStore(ctx context.Context, url string, timeout time.Duration) *storeProbe {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	p := &storeProbe{}
	if storeopen.IsSQL(url) {
		p.flavor = migrations.Postgres
		p.latest, _ = migrations.Latest(p.flavor)
		s, err := pgstore.Open(ctx, url, pgstore.Options{})
		if err != nil {
			p.err = err
			return p
		}
		defer s.Close()
		if p.head, p.err = s.Head(ctx); p.err != nil {
			return p
		}
		p.lease, p.leaseOK, _ = s.CurrentLease(ctx, events.LeaderLease)
		var v int64
		if err := s.Pool().QueryRow(ctx, `SELECT version, dirty FROM schema_migrations`).Scan(&v, &p.dirty); err != nil {
			p.versionErr = err
		}
		p.version = uint(v)
		return p
	}
	p.flavor = migrations.SQLite
	p.latest, _ = migrations.Latest(p.flavor)
	path := strings.TrimPrefix(strings.TrimPrefix(url, "sqlite://"), "file://")
	if _, err := os.Stat(path); err != nil {
		p.err = err
		return p
	}
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		p.err = err
		return p
	}
	defer db.Close()
	if err := db.QueryRowContext(ctx, `SELECT COALESCE(max(position), 0) FROM events`).Scan(&p.head); err != nil {
		p.err = err
		return p
	}
	var exp int64
	err = db.QueryRowContext(ctx, `SELECT holder, epoch, expires_at FROM leases WHERE name = ?`, events.LeaderLease).Scan(&p.lease.Holder, &p.lease.Epoch, &exp)
	if err == nil {
		p.leaseOK, p.lease.Name, p.lease.ExpiresAt = true, events.LeaderLease, time.UnixMicro(exp)
	} else if !errors.Is(err, sql.ErrNoRows) {
		p.err = err
		return p
	}
	var v int64
	if err := db.QueryRowContext(ctx, `SELECT version, dirty FROM schema_migrations`).Scan(&v, &p.dirty); err != nil {
		p.versionErr = err
	}
	p.version = uint(v)
	return p
}
