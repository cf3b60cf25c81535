package fauxmaster

import (
	"fmt"
	"math"
	"path"
	"regexp"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
	"github.com/corralhq/corral/scheduler"
)

// Change is what a replay does differently from the recorded cell.
type Change struct {
	// RemovePercent of the window's machines (drawn by the seed) are
	// removed at its start and never registered during it.
	RemovePercent float64
	// Add registers machines at the window's start.
	Add []MachineGroup
	// Policy and PoolSize replace the scheduling pass's (empty, 0: the
	// defaults the cell runs with; PoolSize -1: every feasible machine).
	Policy   scheduler.Policy
	PoolSize int
	// Jobs change the specs of the jobs they select, in every submission
	// and update the replay makes.
	Jobs []JobChange
	// Quotas replace the quotas of the users and bands they name: set at
	// the window's start, and in place of the recorded ones.
	Quotas []QuotaChange
}

// JobChange is a change to the specs of the jobs Selector matches
// (user/job, each side a path.Match pattern: "alice/*", "*/web").
type JobChange struct {
	Selector string
	Priority *int32  // a new priority
	Scale    float64 // requests (CPU and memory) times this; 0: unchanged
}

// QuotaChange is one user's quota in one band.
type QuotaChange struct {
	User, Band string
	Resources  projections.Resources
}

// apply changes spec (a copy the replay submits) by the changes that
// select it, in order.
func (c Change) apply(spec *events.JobSpec) *events.JobSpec {
	var out *events.JobSpec
	for _, jc := range c.Jobs {
		if !jc.matches(spec.GetUser(), spec.GetName()) {
			continue
		}
		if out == nil {
			out = proto.Clone(spec).(*events.JobSpec)
		}
		if jc.Priority != nil {
			out.Priority = *jc.Priority
		}
		if jc.Scale > 0 {
			scale := func(r *events.Resources) {
				if r != nil {
					r.CpuMilli = max(int64(float64(r.CpuMilli)*jc.Scale), 1)
					r.MemoryBytes = max(int64(float64(r.MemoryBytes)*jc.Scale), 1)
				}
			}
			scale(out.Resources)
			for _, o := range out.Overrides {
				scale(o.GetResources())
			}
		}
	}
	if out == nil {
		return spec
	}
	return out
}

func (jc JobChange) matches(user, job string) bool {
	u, j, _ := strings.Cut(jc.Selector, "/")
	okU, _ := path.Match(u, user)
	okJ, _ := path.Match(j, job)
	return okU && okJ
}

// ParseJobChange reads "SELECTOR:priority=N" or "SELECTOR:scale=F"
// (several joined by commas): "alice/*:priority=9", "*/batch-*:scale=0.5".
func ParseJobChange(s string) (JobChange, error) {
	sel, changes, ok := strings.Cut(s, ":")
	u, j, slash := strings.Cut(sel, "/")
	if !ok || !slash || u == "" || j == "" {
		return JobChange{}, fmt.Errorf("job: %q is not USER/JOB:priority=N or USER/JOB:scale=F (patterns allowed: alice/*)", s)
	}
	for _, p := range []string{u, j} {
		if _, err := path.Match(p, ""); err != nil {
			return JobChange{}, fmt.Errorf("job: %q: a bad pattern: %v", sel, err)
		}
	}
	jc := JobChange{Selector: sel}
	for _, kv := range strings.Split(changes, ",") {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "priority":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || n > events.MaxPriority {
				return JobChange{}, fmt.Errorf("job: %q: priority must be 0 to %d", s, events.MaxPriority)
			}
			p := int32(n)
			jc.Priority = &p
		case "scale":
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || !(f > 0 && f <= 100) {
				return JobChange{}, fmt.Errorf("job: %q: scale must be in (0, 100]", s)
			}
			jc.Scale = f
		default:
			return JobChange{}, fmt.Errorf("job: %q: %q is neither priority nor scale", s, k)
		}
	}
	return jc, nil
}

// ParseQuotaChange reads "USER/BAND=CPU,MEMORY": "alice/production=100,400Gi"
// (cores, then bytes with a unit, as job specs write them).
func ParseQuotaChange(s string) (QuotaChange, error) {
	who, amounts, ok := strings.Cut(s, "=")
	user, band, slash := strings.Cut(who, "/")
	cpu, mem, comma := strings.Cut(amounts, ",")
	if !ok || !slash || !comma || user == "" || band == "" {
		return QuotaChange{}, fmt.Errorf("quota: %q is not USER/BAND=CPU,MEMORY, e.g. alice/production=100,400Gi", s)
	}
	milli, err := commands.ParseMilli(cpu)
	if err != nil {
		return QuotaChange{}, fmt.Errorf("quota: %q: cpu: %v", s, err)
	}
	bytes, err := commands.ParseBytes(mem)
	if err != nil {
		return QuotaChange{}, fmt.Errorf("quota: %q: memory: %v", s, err)
	}
	return QuotaChange{User: user, Band: band, Resources: projections.Resources{CPUMilli: milli, MemoryBytes: bytes}}, nil
}

// MachineGroup is Count machines of one shape.
type MachineGroup struct {
	Count      int
	Capacity   projections.Resources
	Attributes map[string]string
}

// IsZero says the change changes nothing.
func (c Change) IsZero() bool {
	return c.RemovePercent == 0 && len(c.Add) == 0 && c.Policy == "" && c.PoolSize == 0 && len(c.Jobs) == 0 && len(c.Quotas) == 0
}

// String is the change as the command line writes it.
func (c Change) String() string {
	var parts []string
	if c.RemovePercent > 0 {
		parts = append(parts, "--remove "+strconv.FormatFloat(c.RemovePercent, 'f', -1, 64)+"%")
	}
	for _, g := range c.Add {
		parts = append(parts, fmt.Sprintf("--add %dx%dc%dg", g.Count, g.Capacity.CPUMilli/1000, g.Capacity.MemoryBytes>>30))
	}
	if c.Policy != "" {
		parts = append(parts, "--policy "+string(c.Policy))
	}
	if c.PoolSize != 0 {
		parts = append(parts, "--pool "+strconv.Itoa(c.PoolSize))
	}
	for _, j := range c.Jobs {
		var what []string
		if j.Priority != nil {
			what = append(what, fmt.Sprintf("priority=%d", *j.Priority))
		}
		if j.Scale > 0 {
			what = append(what, "scale="+strconv.FormatFloat(j.Scale, 'f', -1, 64))
		}
		parts = append(parts, "--job "+j.Selector+":"+strings.Join(what, ","))
	}
	for _, q := range c.Quotas {
		parts = append(parts, fmt.Sprintf("--quota %s/%s=%s", q.User, q.Band, q.Resources))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

func (c Change) removals(machines int) int {
	return int(math.Round(float64(machines) * c.RemovePercent / 100))
}

// ParseRemove reads "10%" (or "10").
func ParseRemove(s string) (float64, error) {
	num := strings.TrimSuffix(strings.TrimSpace(s), "%")
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || strings.ContainsAny(num, "_xXpP") || math.IsNaN(v) || v < 0 || v > 100 {
		return 0, fmt.Errorf("remove: %q is not a percentage from 0 to 100", s)
	}
	return v, nil
}

var machineShape = regexp.MustCompile(`^(\d+)x(\d+(?:\.\d+)?)c(\d+(?:\.\d+)?)g(?:(\d+)gpu)?$`)

// maxAdded bounds what one --add may register: a replay holds every
// machine in memory.
const maxAdded = 100_000

// ParseMachines reads "200x32c128g": 200 machines of 32 cores and 128 GiB
// each, optionally "...g2gpu" for GPUs.
func ParseMachines(s string) (MachineGroup, error) {
	m := machineShape.FindStringSubmatch(strings.ToLower(strings.TrimSpace(s)))
	if m == nil {
		return MachineGroup{}, fmt.Errorf("add: %q is not COUNTxCORESc<GiB>g, e.g. 200x32c128g", s)
	}
	n, err := strconv.Atoi(m[1])
	if err != nil || n <= 0 || n > maxAdded {
		return MachineGroup{}, fmt.Errorf("add: the count in %q must be 1 to %d", s, maxAdded)
	}
	cores, _ := strconv.ParseFloat(m[2], 64)
	gib, _ := strconv.ParseFloat(m[3], 64)
	// Bounded as the machine registers them: at least a millicore and a
	// thousandth of a GiB, so a shape the form takes is one the replay
	// takes.
	if cores < 0.001 || cores > 1e5 || gib < 0.001 || gib > 1e6 {
		return MachineGroup{}, fmt.Errorf("add: %q: cores must be in [0.001, 100000] and GiB in [0.001, 1000000]", s)
	}
	g := MachineGroup{Count: n, Capacity: projections.Resources{CPUMilli: int64(cores * 1000), MemoryBytes: int64(gib * (1 << 30)),
		DiskBytes: 1 << 40, Ports: 1000}}
	if m[4] != "" {
		gpus, err := strconv.Atoi(m[4])
		if err != nil || gpus > 64 {
			return MachineGroup{}, fmt.Errorf("add: %q: at most 64 GPUs", s)
		}
		g.Capacity.GPUMilli = int64(gpus) * 1000
	}
	return g, nil
}

// ChangeArgs is a change in the words of `corral sim`'s flags and the
// what-if page's fields: each parsed by ParseChange, the one reading of
// them.
type ChangeArgs struct {
	Remove string   `json:"remove,omitempty"`
	Add    []string `json:"add,omitempty"`
	Jobs   []string `json:"jobs,omitempty"`
	Quotas []string `json:"quotas,omitempty"`
	Policy string   `json:"policy,omitempty"`
	Pool   int      `json:"pool,omitempty"`
}

// ChangeError is a ChangeArgs field that does not parse: Field names it
// as its flag does (add, remove, job, quota, policy, pool).
type ChangeError struct {
	Field string
	Err   error
}

func (e *ChangeError) Error() string {
	msg := e.Err.Error()
	if !strings.HasPrefix(msg, e.Field+": ") {
		msg = e.Field + ": " + msg
	}
	return msg
}

func (e *ChangeError) Unwrap() error { return e.Err }

// maxAddShapes bounds the machine shapes one change adds.
const maxAddShapes = 16

// ParseChange reads a ChangeArgs; an error is a *ChangeError naming the
// field.
func ParseChange(a ChangeArgs) (Change, error) {
	var c Change
	var err error
	if strings.TrimSpace(a.Remove) != "" {
		if c.RemovePercent, err = ParseRemove(a.Remove); err != nil {
			return Change{}, &ChangeError{"remove", err}
		}
	}
	if len(a.Add) > maxAddShapes {
		return Change{}, &ChangeError{"add", fmt.Errorf("at most %d machine shapes", maxAddShapes)}
	}
	for _, s := range a.Add {
		g, err := ParseMachines(s)
		if err != nil {
			return Change{}, &ChangeError{"add", err}
		}
		c.Add = append(c.Add, g)
	}
	for _, s := range a.Jobs {
		j, err := ParseJobChange(s)
		if err != nil {
			return Change{}, &ChangeError{"job", err}
		}
		c.Jobs = append(c.Jobs, j)
	}
	for _, s := range a.Quotas {
		q, err := ParseQuotaChange(s)
		if err != nil {
			return Change{}, &ChangeError{"quota", err}
		}
		c.Quotas = append(c.Quotas, q)
	}
	if a.Policy != "" {
		if c.Policy, err = scheduler.ParsePolicy(a.Policy); err != nil {
			return Change{}, &ChangeError{"policy", err}
		}
	}
	if a.Pool < -1 {
		return Change{}, &ChangeError{"pool", fmt.Errorf("%d: want -1 (every feasible machine), 0 (the default) or a pool size", a.Pool)}
	}
	c.PoolSize = a.Pool
	return c, nil
}

// Flags are the `corral sim` flags that say a; a child process replaying
// for the what-if page is given these (each as --name=value, so no value
// can pass for a flag).
func (a ChangeArgs) Flags() []string {
	var out []string
	if a.Remove != "" {
		out = append(out, "--remove="+a.Remove)
	}
	for _, s := range a.Add {
		out = append(out, "--add="+s)
	}
	for _, s := range a.Jobs {
		out = append(out, "--job="+s)
	}
	for _, s := range a.Quotas {
		out = append(out, "--quota="+s)
	}
	if a.Policy != "" {
		out = append(out, "--policy="+a.Policy)
	}
	if a.Pool != 0 {
		out = append(out, "--pool="+strconv.Itoa(a.Pool))
	}
	return out
}
