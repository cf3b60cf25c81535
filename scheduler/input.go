package scheduler

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/corralhq/corral/events"
)

// The scheduler's input: a read-only view of the cell that an adapter builds
// from the projection. Nothing in a pass writes to it. It is shaped so that
// the adapter can keep one Cell and update it per event: a machine is one
// pointer whose Version moves whenever anything on it changes, and the
// scheduler caches what it derives from a machine under that version.

// TaskRef names one task of one job. Unlike events.TaskRef it is comparable,
// so it can key maps.
type TaskRef struct {
	User  string
	Job   string
	Index int32
}

// String prints the task as Borg's name service does: index.job.user.
func (r TaskRef) String() string {
	return strconv.Itoa(int(r.Index)) + "." + r.Job + "." + r.User
}

func (r TaskRef) less(o TaskRef) bool {
	if r.User != o.User {
		return r.User < o.User
	}
	if r.Job != o.Job {
		return r.Job < o.Job
	}
	return r.Index < o.Index
}

// MachineState is whether a machine takes new tasks.
type MachineState uint8

const (
	MachineUp       MachineState = iota // takes new tasks
	MachineDraining                     // up, keeps its tasks, takes no new ones
	MachineDown                         // missed its polls or was taken out
)

func (s MachineState) String() string {
	switch s {
	case MachineDraining:
		return "draining"
	case MachineDown:
		return "down"
	}
	return "up"
}

// Machine is one machine of the cell as the scheduler sees it.
type Machine struct {
	Name string
	// Version changes whenever anything below changes (the log position of
	// the last event that touched the machine is a good choice). Placements
	// carry it so the command handler can refuse ones computed against a
	// stale machine; the scheduler caches derived state under it.
	Version    int64
	State      MachineState
	Capacity   Resources
	Attributes map[string]string // e.g. arch, rack, power, kernel
	// PortBase is the first port handed to tasks; the machine offers
	// Capacity[Ports] ports from there on.
	PortBase int32
	Packages []string // packages already installed, for the locality preference
	Tasks    []PlacedTask
	Allocs   []PlacedAlloc
}

// PlacedTask is a task already assigned to a machine (running or starting).
type PlacedTask struct {
	Ref      TaskRef
	Priority int32
	// Limit is what the task asked for; Reservation is the master's estimate
	// of what it needs (equal to the limit until estimation moves it).
	Limit       Resources
	Reservation Resources
	Ports       []int32 // port numbers it holds
	// AllocSet is the name of the alloc set (of the same user) the task runs
	// inside, empty when it runs on the machine directly. A task inside an
	// alloc consumes the alloc's capacity, not the machine's.
	AllocSet   string
	AllocIndex int32
	Package    string
}

// AllocSetRef names an alloc set.
type AllocSetRef struct {
	User string
	Name string
}

// PlacedAlloc is one alloc instance on a machine: capacity reserved whether
// used or not. The scheduler never preempts allocs.
type PlacedAlloc struct {
	Set      AllocSetRef
	Index    int32
	Priority int32
	Capacity Resources
}

// Op is a constraint operator, written in specs as its string.
type Op string

const (
	OpEq     Op = "="
	OpNe     Op = "!="
	OpLt     Op = "<"
	OpGt     Op = ">"
	OpIn     Op = "in"
	OpExists Op = "exists"
)

// Ops is every operator, in the order messages and documents list them:
// the one list the spec's validation, the pass and the job file's
// rendering ask.
var Ops = []Op{OpEq, OpNe, OpLt, OpGt, OpIn, OpExists}

// Valid reports whether o is one of Ops.
func (o Op) Valid() bool { return slices.Contains(Ops, o) }

// Values is how many values the operator takes: at least lo, at most hi
// (-1: no bound).
func (o Op) Values() (lo, hi int) {
	switch o {
	case OpIn:
		return 1, -1
	case OpExists:
		return 0, 0
	}
	return 1, 1
}

// WhyNotValues is why n values do not suit the operator, "" when they do.
func (o Op) WhyNotValues(n int) string {
	lo, hi := o.Values()
	switch {
	case hi == 0 && n != 0:
		return fmt.Sprintf("%s takes no value", o)
	case hi == 1 && n != 1:
		return fmt.Sprintf("%s needs exactly one value", o)
	case n < lo:
		return fmt.Sprintf("%s needs one or more values", o)
	}
	return ""
}

// OpNames lists the operators for a message: "=, !=, <, >, in or exists".
func OpNames() string {
	names := make([]string, len(Ops))
	for i, o := range Ops {
		names[i] = string(o)
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// Constraint restricts (hard) or prefers (soft) machines by an attribute.
// "<" and ">" compare as numbers when both sides parse as numbers, else as
// strings. "!=" holds on machines without the attribute.
type Constraint struct {
	Attribute string
	Op        Op
	Values    []string
	Soft      bool
}

// ConstraintFromEvents converts the catalogue's message.
func ConstraintFromEvents(c *events.Constraint) Constraint {
	return Constraint{Attribute: c.GetAttribute(), Op: Op(c.GetOp()), Values: c.GetValues(), Soft: c.GetSoft()}
}

// String prints the constraint as a user wrote it: "arch=arm64",
// "zone in (a,b)", "ssd exists".
func (c Constraint) String() string {
	s := c.Attribute
	switch c.Op {
	case OpExists:
		s += " exists"
	case OpIn:
		s += " in ("
		for i, v := range c.Values {
			if i > 0 {
				s += ","
			}
			s += v
		}
		s += ")"
	default:
		v := ""
		if len(c.Values) > 0 {
			v = c.Values[0]
		}
		s += string(c.Op) + v
	}
	if c.Soft {
		s += " (soft)"
	}
	return s
}

// PendingTask is a task waiting for a machine.
type PendingTask struct {
	Ref      TaskRef
	Priority int32
	// Seq is the submission order (the log position of its TaskSubmitted):
	// smaller goes first within a user and priority.
	Seq         int64
	SpecVersion int64
	Resources   Resources // the limit
	Constraints []Constraint
	AllocSet    string // run inside this alloc set of the same user; empty: none
	Package     string
	// CrashedOn lists machines where this task (or its job) crashed or
	// crashed the machine recently; the adapter decides what "recently" is.
	CrashedOn []string
	// Spread names machine attributes whose values the job's tasks spread
	// evenly across (the first one first): a task goes where its job has
	// the fewest tasks by those values, then by score.
	Spread []string
	// DistinctHosts: no two tasks of the job on one machine (a hard rule).
	DistinctHosts bool
	// Pack opts the job out of spreading by default: its tasks go where
	// the policy's fit puts them, leaning away from each other only by
	// the spread weights. Without it a machine (or failure domain)
	// already holding SpreadCap of the job's tasks pays Weights.OverCap
	// (spread.go).
	Pack bool
}

// PendingAlloc is an alloc instance waiting for a machine. Allocs are
// placed ahead of tasks of the same priority, so that tasks of their set
// can go into them in the same pass; they never preempt and are never
// preempted.
type PendingAlloc struct {
	Set         AllocSetRef
	Index       int32
	Priority    int32
	Seq         int64 // submission order, as for tasks
	Resources   Resources
	Constraints []Constraint
}

// Cell is the whole input of a pass.
type Cell struct {
	Machines      []*Machine
	Pending       []PendingTask
	PendingAllocs []PendingAlloc
}

// Validate checks the input for what a pass cannot make sense of. A pass does
// not call it (it clamps priorities and ignores negative quantities); adapters
// and loaders do, so bad input is refused with a reason.
func (c *Cell) Validate() error {
	names := make(map[string]bool, len(c.Machines))
	for i, m := range c.Machines {
		if m == nil {
			return fmt.Errorf("machines[%d]: nil", i)
		}
		if m.Name == "" {
			return fmt.Errorf("machines[%d].name: empty", i)
		}
		if names[m.Name] {
			return fmt.Errorf("machines[%d].name: %q appears twice", i, m.Name)
		}
		names[m.Name] = true
		if err := checkResources(m.Capacity); err != nil {
			return fmt.Errorf("machine %s: capacity: %w", m.Name, err)
		}
		for j, t := range m.Tasks {
			if err := checkPriority(t.Priority); err != nil {
				return fmt.Errorf("machine %s: tasks[%d] (%s): %w", m.Name, j, t.Ref, err)
			}
		}
	}
	seen := make(map[TaskRef]bool, len(c.Pending))
	for i, t := range c.Pending {
		if t.Ref.Job == "" {
			return fmt.Errorf("pending[%d].ref.job: empty", i)
		}
		if seen[t.Ref] {
			return fmt.Errorf("pending[%d]: task %s appears twice", i, t.Ref)
		}
		seen[t.Ref] = true
		if err := checkPriority(t.Priority); err != nil {
			return fmt.Errorf("pending task %s: %w", t.Ref, err)
		}
		if err := checkResources(t.Resources); err != nil {
			return fmt.Errorf("pending task %s: resources: %w", t.Ref, err)
		}
		for j, k := range t.Constraints {
			if err := k.validate(); err != nil {
				return fmt.Errorf("pending task %s: constraints[%d]: %w", t.Ref, j, err)
			}
		}
	}
	type allocKey struct {
		set   AllocSetRef
		index int32
	}
	seenAlloc := map[allocKey]bool{}
	for i, a := range c.PendingAllocs {
		if a.Set.Name == "" {
			return fmt.Errorf("pendingAllocs[%d].set.name: empty", i)
		}
		if k := (allocKey{a.Set, a.Index}); seenAlloc[k] {
			return fmt.Errorf("pendingAllocs[%d]: alloc %s/%s/%d appears twice", i, a.Set.User, a.Set.Name, a.Index)
		} else {
			seenAlloc[k] = true
		}
		if err := checkPriority(a.Priority); err != nil {
			return fmt.Errorf("pending alloc %s/%s/%d: %w", a.Set.User, a.Set.Name, a.Index, err)
		}
		if err := checkResources(a.Resources); err != nil {
			return fmt.Errorf("pending alloc %s/%s/%d: resources: %w", a.Set.User, a.Set.Name, a.Index, err)
		}
		for j, k := range a.Constraints {
			if err := k.validate(); err != nil {
				return fmt.Errorf("pending alloc %s/%s/%d: constraints[%d]: %w", a.Set.User, a.Set.Name, a.Index, j, err)
			}
		}
	}
	return nil
}

func checkPriority(p int32) error {
	if p < 0 || p > MaxPriority {
		return fmt.Errorf("priority %d outside 0-%d", p, MaxPriority)
	}
	return nil
}

func checkResources(r Resources) error {
	for d := Dim(0); d < NumDims; d++ {
		if r[d] < 0 {
			return fmt.Errorf("%s is negative (%d)", d, r[d])
		}
	}
	return nil
}

func (c Constraint) validate() error {
	switch {
	case c.Attribute == "":
		return fmt.Errorf("attribute: empty")
	case !c.Op.Valid():
		return fmt.Errorf("op %q: want one of %s", c.Op, OpNames())
	}
	if why := c.Op.WhyNotValues(len(c.Values)); why != "" {
		return fmt.Errorf("op %s", why)
	}
	return nil
}
