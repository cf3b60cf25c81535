package scheduler

import (
	"fmt"
	"strings"
)

// Plan is the output of a pass: placements to propose as one PlaceTasks
// command (allocs first), and an explanation for every class that kept
// tasks or allocs pending.
type Plan struct {
	AllocPlacements []AllocPlacement
	Placements      []Placement
	Pending         []Explanation
	Stats           Stats
}

// AllocPlacement assigns one pending alloc instance to a machine.
type AllocPlacement struct {
	Alloc            AllocRef
	Machine          string
	MachineVersion   int64
	Score            float64
	MachinesExamined int32
	// Before is how many task placements the pass made before this one:
	// the applier takes the plan in the pass's order (a task's preemption
	// may have made the room this alloc uses).
	Before int
}

// AllocRef names one alloc instance.
type AllocRef struct {
	Set   AllocSetRef
	Index int32
}

func (r AllocRef) String() string {
	return fmt.Sprintf("%s/%s/%d", r.Set.User, r.Set.Name, r.Index)
}

// Placement assigns one pending task to a machine.
type Placement struct {
	Task        TaskRef
	SpecVersion int64
	Machine     string
	// MachineVersion is the version of the machine the placement was
	// computed against. Several placements of one plan may share a machine
	// and version: the handler checks the plan's placements on a machine
	// together, against that version.
	MachineVersion   int64
	Score            float64
	MachinesExamined int32
	// Preempted lists the tasks evicted to make room, lowest priority first.
	// They return to pending; their TaskEvicted names this task.
	Preempted  []TaskRef
	Ports      []int32
	AllocSet   string // empty when the task runs on the machine directly
	AllocIndex int32
}

// Stats counts the work of a pass.
type Stats struct {
	Pending           int // tasks and allocs in the queue
	Placed            int // tasks and allocs placed
	Classes           int
	Preemptions       int // tasks evicted
	FeasibilityChecks int // machine evaluations, cached ones excluded
	// InfeasibleRemembered counts machines a class skipped because an
	// earlier pass found them infeasible for it and they have not changed.
	InfeasibleRemembered int
	// ExplainRemembered counts machines whose verdict for a pending class
	// an earlier pass's explanation gave (explainmemo.go).
	ExplainRemembered int
	ScoreCacheHits    int // pool entries reused because the machine had not changed
	// Reruns counts the runs after the first: 1 when tasks left pending
	// had room at the start of the pass and the pass ran again with their
	// classes first, plus one per new sample drawn while that left a near
	// miss, plus one or two per other rule tried on a close miss (its
	// first run and its rerun), plus one for the run with every machine
	// in view. RerunKept is the run this plan is: 0 the first, 1 the
	// rerun, 2 and 3 the new samples, 4 and 5 worst-fit's first run and
	// rerun, 6 and 7 best-fit's, 8 the whole view (reorder.go,
	// portfolio.go). FeasibilityChecks counts every run.
	Reruns, RerunKept int
	// Unblocked counts the tasks left pending that were placed by moving
	// Relocated of the pass's placements to other machines (relocate.go);
	// RelocationChecks counts the machine evaluations that took (not in
	// FeasibilityChecks).
	Unblocked, Relocated, RelocationChecks int
	// Packed: spreading by default left more tasks pending at some
	// priority than packing every job, and this plan is the packing run's
	// (spread.go). FeasibilityChecks counts both.
	Packed bool
}

// Reason is why a machine was rejected for a class. A machine counts under
// the first check it fails; checks run cheapest first, in this order.
type Reason uint8

const (
	ReasonDown          Reason = iota // machine down
	ReasonDraining                    // machine draining
	ReasonCrashedHere                 // the task crashed there recently
	ReasonConstraint                  // a hard constraint does not hold
	ReasonDistinctHosts               // the job has a task there already (distinct_hosts)
	ReasonNoAlloc                     // no instance of the task's alloc set there
	ReasonAllocFull                   // the alloc instance lacks room
	ReasonCPU                         // not enough CPU, even after preemption
	ReasonMemory
	ReasonDisk
	ReasonGPU
	ReasonPorts
	numReasons
)

var reasonText = [numReasons]string{
	"machine down", "machine draining", "crashed here recently", "constraint", "distinct_hosts: a task of the job runs there",
	"alloc set not on machine", "alloc full",
	"not enough cpu", "not enough memory", "not enough disk", "not enough gpu", "not enough ports",
}

func (r Reason) String() string {
	if r < numReasons {
		return reasonText[r]
	}
	return fmt.Sprintf("reason(%d)", int(r))
}

func reasonForDim(d Dim) Reason { return ReasonCPU + Reason(d) }

// Rejection counts the machines rejected for one reason.
type Rejection struct {
	Reason     Reason
	Constraint string // the constraint, for ReasonConstraint
	Machines   int
}

func (r Rejection) String() string {
	if r.Reason == ReasonConstraint {
		return fmt.Sprintf("%d: constraint %s", r.Machines, r.Constraint)
	}
	return fmt.Sprintf("%d: %s", r.Machines, r.Reason)
}

// Explanation says why a class of tasks stays pending: what the tasks need,
// how many machines each check rejected, and hints at what would help.
type Explanation struct {
	Tasks       []TaskRef  // the class's tasks left pending, in queue order
	Allocs      []AllocRef // or its allocs, for a class of pending allocs
	Priority    int32
	Resources   Resources
	Constraints []Constraint
	AllocSet    string
	Machines    int         // machines in the cell
	Rejections  []Rejection // most machines first
	Hints       []string
}

// String prints the explanation on a few lines, as "corral why" shows it.
func (e *Explanation) String() string {
	var b strings.Builder
	if len(e.Allocs) > 0 {
		fmt.Fprintf(&b, "%d alloc(s) like %s, priority %d, %s", len(e.Allocs), e.Allocs[0], e.Priority, e.Resources)
	} else {
		fmt.Fprintf(&b, "%d task(s) like %s, priority %d, %s", len(e.Tasks), e.Tasks[0], e.Priority, e.Resources)
	}
	for _, c := range e.Constraints {
		fmt.Fprintf(&b, ", %s", c)
	}
	if e.AllocSet != "" {
		fmt.Fprintf(&b, ", in alloc set %s", e.AllocSet)
	}
	fmt.Fprintf(&b, "\n  %d machine%s rejected", e.Machines, plural(e.Machines))
	for _, r := range e.Rejections {
		fmt.Fprintf(&b, "\n    %s", r)
	}
	for _, h := range e.Hints {
		fmt.Fprintf(&b, "\n  hint: %s", h)
	}
	return b.String()
}
