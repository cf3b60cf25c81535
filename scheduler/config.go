package scheduler

import "fmt"

// Policy selects how the fit of a task on a machine is scored.
type Policy string

const (
	// PolicyWorstFit spreads load the way E-PVM does: it minimises the rise
	// of an exponential cost of utilisation, so emptier machines win.
	// Headroom for spikes, at the price of fragmentation.
	PolicyWorstFit Policy = "worst-fit"
	// PolicyBestFit fills machines as tightly as possible.
	PolicyBestFit Policy = "best-fit"
	// PolicyHybrid packs tightly while avoiding stranded resources: free
	// capacity in one dimension that cannot be used because another
	// dimension of the same machine is full.
	PolicyHybrid Policy = "hybrid"
)

// Policies lists the policies in the order reports print them.
var Policies = []Policy{PolicyWorstFit, PolicyBestFit, PolicyHybrid}

// ParsePolicy accepts a policy name.
func ParsePolicy(s string) (Policy, error) {
	switch p := Policy(s); p {
	case PolicyWorstFit, PolicyBestFit, PolicyHybrid:
		return p, nil
	}
	return "", fmt.Errorf("scheduler: policy %q: want worst-fit, best-fit or hybrid", s)
}

// Config tunes a pass. The zero value is not useful; start from
// DefaultConfig.
type Config struct {
	Policy Policy
	// FeasibleK is the relaxed-randomization budget: a class examines
	// machines in a seeded random order until it has K feasible ones and
	// scores only those. Zero or negative examines every machine.
	FeasibleK int
	Weights   Weights
	// SpreadDomains are the machine attributes that name failure domains,
	// widest last; a job's tasks are spread across machines and across the
	// values of these attributes.
	SpreadDomains [2]string
	// NoExplanations leaves out the why-pending answers (Explanation's
	// Rejections and Hints; the tasks left pending are still listed): a
	// caller that never reads them (a replay, the compaction harness)
	// saves the pass re-examining every machine for every class left
	// pending. Placements do not depend on it.
	NoExplanations bool
	// packAll treats every job as packing (PendingTask.Pack): the run a
	// pass compares spreading by default against (spread.go).
	packAll bool
}

// Weights scale the preferences added to the policy's fit. The fit of
// worst-fit and best-fit lies in [0, 1]; hybrid's also carries its
// stranding penalty, which for a placement that strands most of a machine
// reaches tens of units. Preemption outweighs everything so that a machine
// needing no eviction wins over one that does; soft constraints outweigh
// the fit and small stranding.
type Weights struct {
	Soft          float64 // share of soft constraints satisfied
	SpreadMachine float64 // share of the job's tasks already on the machine
	SpreadDomain  [2]float64
	// OverCap is paid by a machine already holding as many of the job's
	// tasks as spreading by default wants there (SpreadCap), half of it
	// by one whose failure domain does: more than any difference of fit,
	// less than stranding much of a machine, keeping scarce room free for
	// the work that needs it, or a preemption.
	OverCap    float64
	Preemption float64 // per evicted task, plus its priority / 12
	Package    float64 // the machine already holds the task's package
	Mix        float64 // share of the machine's CPU held by the other band
}

// Validate reports a configuration a pass cannot use.
func (c Config) Validate() error {
	if _, err := ParsePolicy(string(c.Policy)); err != nil {
		return err
	}
	for _, w := range []float64{c.Weights.Soft, c.Weights.SpreadMachine, c.Weights.SpreadDomain[0],
		c.Weights.SpreadDomain[1], c.Weights.OverCap, c.Weights.Preemption, c.Weights.Package, c.Weights.Mix} {
		if w < 0 {
			return fmt.Errorf("scheduler: weights must not be negative: %+v", c.Weights)
		}
	}
	return nil
}

// DefaultConfig is the configuration a cell runs with.
func DefaultConfig() Config {
	return Config{
		Policy:    PolicyHybrid,
		FeasibleK: 64,
		Weights: Weights{
			Soft:          4,
			SpreadMachine: 0.5,
			SpreadDomain:  [2]float64{0.2, 0.1},
			OverCap:       1,
			Preemption:    1000,
			Package:       0.25,
			Mix:           0.05,
		},
		SpreadDomains: [2]string{"rack", "power"},
	}
}
