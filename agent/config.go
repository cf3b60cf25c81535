package agent

import (
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"regexp"
	goruntime "runtime"
	"syscall"
	"time"

	"github.com/corralhq/corral/agent/internal/procfs"
	"github.com/corralhq/corral/events"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// Config is what an agent needs to run. Zero values take the defaults noted.
type Config struct {
	Name string // the machine's name in the cell; required
	// Masters are the cell's masters' gRPC addresses: Run registers with
	// the first that answers and follows a follower to the leader it names.
	// None: runs without registering.
	Masters       []string
	ListenAddr    string // where the Agent service listens (Run only); default "127.0.0.1:7070"
	AdvertiseAddr string // the address given to the master; default the listener's
	HTTPAddr      string // where /metrics, /healthz and /readyz are served (Run only); "" serves none
	DataDir       string // sandboxes, logs and the agent's state; required

	// Capacity is what the machine offers to tasks. Fields left zero are
	// detected: cores from goruntime.NumCPU, memory from /proc/meminfo, disk
	// from statfs of DataDir, ports from the port range.
	Capacity *events.Resources
	// PortFirst and PortLast bound the ports the master may assign to tasks
	// on this machine; default 20000-29999, or 20000 and up for
	// Capacity.Ports ports when only the count is set.
	PortFirst, PortLast int32
	// Attributes describe the machine for constraints (rack, power, ...).
	// "arch" and "os" are detected and may not be set.
	Attributes map[string]string

	// Cgroups is "auto" (default: v2, else v1, else sampling), "v1", "v2"
	// or "sampling" (no cgroups; memory enforced by sampling /proc).
	Cgroups string
	// Cell and CellID name the cell the machine belongs to (CellID tells
	// two cells of one name apart, even two made from one copied CA, so it
	// must be the cell's own, not derived from its certificates). They are
	// part of the default
	// CgroupParent, so that agents of two cells on one machine never see,
	// adopt or sweep each other's containers.
	Cell, CellID string
	// CgroupParent is the cgroup path, relative to each hierarchy's root,
	// under which task containers are made, and the only one the agent
	// sweeps; default "corral/<Cell>-<CellID>/<Name>" ("corral/<Name>"
	// without a cell identity).
	CgroupParent string

	SampleInterval time.Duration // usage sampling, log rotation checks; default 1s
	DefaultGrace   time.Duration // SIGTERM to SIGKILL when a stop gives none; default 10s
	LogMaxBytes    int64         // rotate a task's stdout or stderr past this size; default 8 MiB
	LogKeep        int           // rotated files kept per stream; default 3
	// MaxLogStreams bounds the log streams (Logs calls) served at once;
	// past it a call is refused with ResourceExhausted, never queued.
	// Default DefaultMaxLogStreams.
	MaxLogStreams int
	RetainEnded   time.Duration // an ended task's status, sandbox and logs are kept this long; default 1h
	// MemoryLowWater: when the machine's available memory falls below it,
	// non-prod tasks are evicted as under memory pressure. Default: 2% of
	// the machine's memory, at most 256 MiB; negative disables.
	MemoryLowWater  int64
	MaxEvents       int           // unacknowledged events kept; default 10000
	ReregisterAfter time.Duration // register again when not polled for this long; default 30s
	// StopTasksOnExit makes Run stop every task (StopAll with DefaultGrace)
	// before it returns, as `corral up` does on Ctrl-C. Otherwise tasks keep
	// running and the next agent on the data dir adopts them.
	StopTasksOnExit bool

	// ServerOptions are given to the gRPC server of the Agent service (Run
	// only): mutual TLS that admits only the cell's masters
	// (auth.AgentServerOptions). None: plaintext, for a trusted network.
	ServerOptions []grpc.ServerOption
	// MasterDialOptions are what Run registers with the master with
	// (auth.AgentDialOptions). None: plaintext.
	MasterDialOptions []grpc.DialOption

	// TaskUIDs, when the agent runs as root, runs each task as a user of
	// its own: a uid from First to First+Count-1, whose group is the same
	// number and which has no other groups. A task's sandbox is then
	// reachable only by that uid (and root): tasks cannot read each
	// other's files, logs or /proc entries, nor signal each other. A uid
	// stays with its task until the master forgets the task; then its
	// sandbox is closed to it and any process left running as it killed.
	// Count 0 (default): off.
	TaskUIDs UIDRange
	// TaskUser, when the agent runs as root and TaskUIDs is off, runs
	// every task as this user (a name or a uid, e.g. "nobody"): the
	// agent's and root's files are safe from tasks, but tasks share one
	// uid and so are not safe from each other. Prefer TaskUIDs.
	TaskUser string

	Clock    Clock        // default RealClock
	Logger   *slog.Logger // default slog.Default()
	OnListen func(addr string)
	// OnHTTPListen is called with the address HTTPAddr listens on.
	OnHTTPListen func(addr string)
	// HTTPMiddleware, when set, wraps the HTTP handler (panic recovery).
	HTTPMiddleware func(http.Handler) http.Handler
	// Metrics, when set, gets the agent's series under a machine label
	// while Run runs (corral up: the master's /metrics shows every agent's).
	Metrics prometheus.Registerer
}

// ProdPriority is the lowest prod priority (the production and monitoring
// bands). The agent never evicts prod tasks for memory pressure.
const ProdPriority = events.MinProdPriority

var (
	nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
	attrRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/-]{0,63}$`)
	// cellPartRE: a cell name or id as a cgroup path component.
	cellPartRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)
)

// withDefaults validates c and returns a copy with defaults applied and
// capacity detected.
// ValidCellPart tells whether s may be a Config.Cell or CellID: a cgroup
// path component.
func ValidCellPart(s string) bool { return cellPartRE.MatchString(s) }

func (c Config) withDefaults() (Config, error) {
	if !nameRE.MatchString(c.Name) {
		return c, fmt.Errorf("Config.Name %q: want 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit", c.Name)
	}
	if c.DataDir == "" {
		return c, fmt.Errorf("Config.DataDir: required")
	}
	if err := os.MkdirAll(c.DataDir, 0o755); err != nil {
		return c, fmt.Errorf("Config.DataDir: %w", err)
	}
	if c.ListenAddr == "" {
		c.ListenAddr = "127.0.0.1:7070"
	}
	for _, step := range []func() error{c.portRange, c.attributes, c.cellScope, c.limits} {
		if err := step(); err != nil {
			return c, err
		}
	}
	if err := c.checkTaskUsers(); err != nil {
		return c, err
	}
	if c.Clock == nil {
		c.Clock = RealClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.Logger = c.Logger.With("machine", c.Name)
	if err := c.detectCapacity(); err != nil {
		return c, err
	}
	return c, nil
}

// portRange defaults and checks the range of ports tasks get.
func (c *Config) portRange() error {
	if c.PortFirst == 0 && c.PortLast == 0 {
		c.PortFirst, c.PortLast = 20000, 29999
		// A port count alone (corral agent --ports N) sizes the range.
		if n := c.Capacity.GetPorts(); n > 0 && n <= 65535-20000+1 {
			c.PortLast = c.PortFirst + n - 1
		}
	}
	if c.PortFirst < 1 || c.PortLast > 65535 || c.PortFirst > c.PortLast {
		return fmt.Errorf("Config.PortFirst-PortLast %d-%d: want 1 <= first <= last <= 65535", c.PortFirst, c.PortLast)
	}
	return nil
}

// attributes checks the attributes given and adds those detected from the
// machine.
func (c *Config) attributes() error {
	attrs := map[string]string{}
	for k, v := range c.Attributes {
		if k == "arch" || k == "os" {
			return fmt.Errorf("Config.Attributes[%s]: detected from the machine; cannot be set", k)
		}
		if !attrRE.MatchString(k) {
			return fmt.Errorf("Config.Attributes[%s]: want 1-64 letters, digits, '.', '_', '/' or '-'", k)
		}
		attrs[k] = v
	}
	attrs["arch"] = goruntime.GOARCH
	attrs["os"] = goruntime.GOOS
	c.Attributes = attrs
	return nil
}

// cellScope defaults the cgroup parent to one scoped to the cell, so that
// several cells share a machine, and checks the cell's names.
func (c *Config) cellScope() error {
	if c.CgroupParent == "" {
		c.CgroupParent = "corral/" + c.Name
		if c.Cell != "" || c.CellID != "" {
			c.CgroupParent = "corral/" + c.Cell + "-" + c.CellID + "/" + c.Name
		}
	}
	if c.Cell != "" && !ValidCellPart(c.Cell) || c.CellID != "" && !ValidCellPart(c.CellID) {
		return fmt.Errorf("Config.Cell %q, CellID %q: want letters, digits, '.', '_' or '-'", c.Cell, c.CellID)
	}
	return nil
}

// limits defaults the intervals and bounds left at zero and refuses negative
// ones.
func (c *Config) limits() error {
	if c.SampleInterval == 0 {
		c.SampleInterval = time.Second
	}
	if c.DefaultGrace == 0 {
		c.DefaultGrace = 10 * time.Second
	}
	if c.LogMaxBytes == 0 {
		c.LogMaxBytes = 8 << 20
	}
	if c.LogKeep == 0 {
		c.LogKeep = 3
	}
	if c.MaxLogStreams == 0 {
		c.MaxLogStreams = DefaultMaxLogStreams
	}
	if c.RetainEnded == 0 {
		c.RetainEnded = time.Hour
	}
	if c.MaxEvents == 0 {
		c.MaxEvents = 10000
	}
	if c.ReregisterAfter == 0 {
		c.ReregisterAfter = 30 * time.Second
	}
	for field, v := range map[string]int64{
		"SampleInterval": int64(c.SampleInterval), "DefaultGrace": int64(c.DefaultGrace),
		"LogMaxBytes": c.LogMaxBytes, "LogKeep": int64(c.LogKeep), "MaxLogStreams": int64(c.MaxLogStreams), "RetainEnded": int64(c.RetainEnded),
		"MaxEvents": int64(c.MaxEvents), "ReregisterAfter": int64(c.ReregisterAfter),
	} {
		if v < 0 {
			return fmt.Errorf("agent: Config.%s: %d is negative", field, v)
		}
	}
	return nil
}

// detectCapacity defaults the capacity left at zero to what the machine has and
// checks it against the port range.
func (c *Config) detectCapacity() error {
	capacity := &events.Resources{}
	if c.Capacity != nil {
		capacity = proto.Clone(c.Capacity).(*events.Resources)
	}
	if capacity.CpuMilli < 0 || capacity.MemoryBytes < 0 || capacity.DiskBytes < 0 || capacity.Ports < 0 || capacity.GpuMilli < 0 {
		return fmt.Errorf("Config.Capacity %v: quantities must not be negative", capacity)
	}
	if capacity.CpuMilli == 0 {
		capacity.CpuMilli = int64(goruntime.NumCPU()) * 1000
	}
	mem, memErr := procfs.ReadMeminfo()
	if capacity.MemoryBytes == 0 {
		if memErr != nil {
			return fmt.Errorf("Config.Capacity.MemoryBytes: not set and not detected: %w", memErr)
		}
		capacity.MemoryBytes = mem.Total
	}
	if capacity.DiskBytes == 0 {
		d, err := diskBytes(c.DataDir)
		if err != nil {
			return fmt.Errorf("Config.Capacity.DiskBytes: not set and not detected: %w", err)
		}
		capacity.DiskBytes = d
	}
	if capacity.Ports == 0 {
		capacity.Ports = c.PortLast - c.PortFirst + 1
	}
	if capacity.Ports > c.PortLast-c.PortFirst+1 {
		return fmt.Errorf("Config.Capacity.Ports %d: more than the %d ports of PortFirst-PortLast %d-%d",
			capacity.Ports, c.PortLast-c.PortFirst+1, c.PortFirst, c.PortLast)
	}
	c.Capacity = capacity
	if c.MemoryLowWater == 0 && memErr == nil {
		c.MemoryLowWater = min(mem.Total/50, 256<<20)
	}
	return nil
}

// diskBytes is the space the data dir's filesystem offers, free to
// unprivileged users.
func diskBytes(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * st.Bsize, nil
}

// machineInfo is what the agent registers with the master.
func cloneAttrs(m map[string]string) map[string]string { return maps.Clone(m) }
