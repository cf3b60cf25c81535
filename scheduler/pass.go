package scheduler

import (
	"math/rand/v2"
	"slices"
	"sync"
)

// Schedule runs one pass over cell with cfg, seeding its random machine
// order with seed. It reads cell and never writes to it.
func Schedule(cell *Cell, cfg Config, seed uint64) *Plan {
	return New(cfg).Schedule(cell, seed)
}

// Scheduler runs passes with one configuration. It keeps nothing between
// passes that could change a result: the same cell and seed give the same
// plan (what it remembers only spares work). It is not safe for concurrent use.
type Scheduler struct {
	cfg  Config
	sums *sumsMemo // nil unless RememberMachines
}

// RememberMachines makes the scheduler keep each input machine's sums (the
// limits and reservations of what it holds) from one pass to the next, so
// that a machine passed again costs a lookup instead of a walk over its
// tasks (the jobs it holds included, numbered, for spreading), and which
// machines each class found infeasible, so that a class skips them while
// they stay the same (infeasible.go). The caller promises
// never to change a Machine once it was passed (the master builds a new
// one whenever its Version moves).
func (s *Scheduler) RememberMachines() { s.sums = &sumsMemo{} }

// sumsMemo holds the last pass's sums per input machine.
type sumsMemo struct {
	mu   sync.Mutex
	last map[*Machine]*machineSums
	// The last pass's input machines, and per class key the machines
	// (by their index there) it found infeasible (infeasible.go).
	machines   []*Machine
	infeasible map[string]bitset
	// jobs numbers the jobs the remembered sums name (machineSums.jobs);
	// refs is how many names the last pass's sums held, which bounds how
	// far the numbering may outgrow the cell before it starts afresh.
	jobs *jobNumbers
	refs int
	// The last pass's input machines and, per class key it explained,
	// what each said (explainmemo.go).
	explainedMachines []*Machine
	explained         map[string][]verdict
}

type machineSums struct {
	usedLim, usedRes, npLim, npRes Resources
	allocs                         []allocState
	// jobs is the job of each task on the machine and the set of each
	// alloc, numbered (jobNumbers): the pass counts where pending jobs
	// already run from these, without hashing names.
	jobs []int32
}

// jobNumbers gives each job (and alloc set) a number, so that the count of
// a job's tasks per machine is an array lookup per task. Numbers are only
// ever added: sums remembered with one numbering stay valid under it.
type jobNumbers struct {
	ids map[jobKey]int32
}

// jobNumbersSlack is how many numbers past twice the jobs the last pass's
// machines named the numbering may hold before it starts afresh.
var jobNumbersSlack = 1 << 16

func newJobNumbers() *jobNumbers { return &jobNumbers{ids: map[jobKey]int32{}} }

func (n *jobNumbers) of(k jobKey) int32 {
	id, ok := n.ids[k]
	if !ok {
		id = int32(len(n.ids))
		n.ids[k] = id
	}
	return id
}

// New returns a scheduler running with cfg. A policy it does not know
// (including none) runs as hybrid; use Config.Validate to refuse it.
func New(cfg Config) *Scheduler {
	if _, err := ParsePolicy(string(cfg.Policy)); err != nil {
		cfg.Policy = PolicyHybrid
	}
	return &Scheduler{cfg: cfg}
}

// Schedule runs one pass; see the package documentation for its steps.
func (s *Scheduler) Schedule(cell *Cell, seed uint64) *Plan {
	p := s.run(cell, seed)
	if p.spreadChose && !noPackRun && p.leftAny() {
		// Spreading by default moved a task off the machine its score
		// chose, and tasks were left pending: run the pass again with
		// every job packing, and keep the spreading plan only if it
		// leaves no more pending at any priority (spread.go).
		packer := *s
		packer.cfg.packAll = true
		q := packer.run(cell, seed)
		checks := p.plan.Stats.FeasibilityChecks + q.plan.Stats.FeasibilityChecks
		if !p.noMorePendingThan(q) {
			p = q
			p.plan.Stats.Packed = true
		}
		p.plan.Stats.FeasibilityChecks = checks
	}
	p.finish()
	return &p.plan
}

// run is one pass's runs up to its explanations: the first, the reruns
// for contested tasks, and relocation.
func (s *Scheduler) run(cell *Cell, seed uint64) *pass {
	p := newPass(s.cfg, cell, seed, s.sums)
	p.placeAll()
	firstChecks := p.plan.Stats.FeasibilityChecks
	if promote := p.contested(); promote != nil {
		// A task left pending that had room at the start of the pass lost
		// it to tasks placed before it: run the pass again with its class
		// first, and keep the plan that places more; then, for a near
		// miss, with new samples, for a close miss under the other rules
		// (portfolio.go), and where it is affordable with every machine
		// in view (reorder.go).
		p = s.runAgain(s.cfg, cell, seed, p, promote, 1)
		p = s.reshuffle(cell, seed, p)
		p = s.tryAlternatives(cell, seed, p)
		p = s.wholeView(cell, seed, p, firstChecks)
	}
	p.relocate()
	return p
}

// pass is the working state of one scheduling pass.
type pass struct {
	cfg  Config
	cell *Cell
	// items is the queue's contents: the pending tasks, then the pending
	// allocs as tasks of a job named after their set, with the same
	// priority and resources (an item at or past nTasks is an alloc:
	// jobKey.alloc keeps a set apart from a job of the same name).
	items    []PendingTask
	nTasks   int
	machines []machine
	perm     []int32 // the seeded random order machines are examined in
	// gens counts this pass's changes to each machine; a class's cached
	// score for a machine is valid only at the gen it was computed at. Kept
	// apart from machine so that checking a pool for staleness stays in cache.
	gens []uint32
	// scoresGen is the generation of every machine's score at once: it moves
	// when the hybrid policy's set of tight shapes changes, and pool entries
	// cached at another scoresGen are stale. (Not a leader's epoch.)
	scoresGen uint32
	rng       *rand.Rand
	k         int

	classes []*class
	classOf []int32 // per pending task
	jobs    map[jobKey]*jobSpread
	byName  map[string]int32 // built on demand
	demand  demand

	victimSets [][]int32 // preemption plans of pool entries

	// A rerun's (reorder.go): the queue items it places first, the first
	// run's count of tasks left pending per priority, and its own so far.
	promote []bool
	bound   *[MaxPriority + 1]int
	left    [MaxPriority + 1]int

	memo *sumsMemo // nil unless the scheduler remembers machines
	// jobNumbers numbered the jobs of every machine's start sums: the
	// memo's (guarded by its mutex) or the pass's own.
	jobNumbers *jobNumbers
	// explained collects the verdicts of the classes explained, for the
	// memo; lastExplained is the last pass's, and explainWhere maps this
	// pass's machines to that pass's (nil: the same machines).
	explained         []explainedClass
	explainedVerdicts int // in explained
	lastExplained     map[string][]verdict
	explainWhere      []int32
	// scratch is explain's working space, reused class after class.
	scratch struct {
		eligible []int32
		maxAvail []Resources
		values   []int64
	}

	// The usable capacity, what the whole workload asks for, and the
	// resources it asks for nearly all of (sumDemand).
	capacity, request Resources
	scarce            [ScoredDims]bool
	// usable counts the machines up and not draining; domainValues the
	// values of each failure-domain attribute among them (spreading by
	// default caps a job's tasks per machine and per value by these).
	usable       int
	domainValues [2]int

	// spreadChose: spreading by default took a machine other than the
	// one the score chose, for some task of this run; spreadMoved, for
	// the last choice.
	spreadChose, spreadMoved bool

	plan Plan
	// planned parallels plan.Placements: the queue item each placement
	// serves and its machine's index. relocate.go moves placements.
	planned []planned
}

// machine is a machine's state during a pass: the input plus what this pass
// has placed on it and evicted from it.
type machine struct {
	in     *Machine
	usable bool
	// start is what the machine held when the pass began (read only; it
	// may be the scheduler's memo of the machine).
	start *machineSums
	// Sums over the tasks that run on the machine directly, plus allocs.
	// Ports always count at the limit: a port is never reclaimed.
	usedLim Resources
	usedRes Resources
	// npLim and npRes are the part of the sums held by non-prod tasks: the
	// most that a prod task could preempt.
	npLim   Resources
	npRes   Resources
	domains [2]int32 // interned failure-domain values, -1 when absent
	// stranded caches the hybrid policy's stranded room of the machine as
	// it stands, per accounting (0: reservations, 1: limits), at strandedGen.
	stranded    [2]float64
	strandedGen [2]uint32 // gen+1, so that zero means not computed

	evicted []bool       // per in.Tasks, allocated on the first eviction
	allocs  []allocState // nil when the machine holds no alloc
	ports   []int32      // sorted ports in use, materialised on first need
	pkgs    []string     // packages this pass brought to the machine
}

type allocState struct {
	set   AllocSetRef
	index int32
	cap   Resources
	used  Resources
}

// jobKey names the job a queue item spreads with: a job's tasks, or an
// alloc set's allocs (an item at or past nTasks is an alloc, its Ref's Job
// the set's name).
type jobKey struct {
	user, job string
	alloc     bool
}

// keyOf is the job the queue item ti spreads with.
func (p *pass) keyOf(ti int32) jobKey {
	r := &p.items[ti].Ref
	return jobKey{r.User, r.Job, int(ti) >= p.nTasks}
}

// jobSpread counts where a job's tasks are, to spread them across machines
// and failure domains.
type jobSpread struct {
	placed   int32
	machines map[int32]int32
	domains  [2]map[int32]int32
	// pack: the job opted out of spreading by default (PendingTask.Pack).
	// capMachine and capDomain are the most of its tasks spreading by
	// default wants on one machine and one value of each failure domain
	// (SpreadCap; 0: no cap, the domain is not declared).
	pack       bool
	tasks      int32 // placed when the pass began, plus pending
	capMachine int32
	capDomain  [2]int32
}

func newPass(cfg Config, cell *Cell, seed uint64, memo *sumsMemo) *pass {
	p := &pass{
		cfg:  cfg,
		cell: cell,
		rng:  rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		k:    cfg.FeasibleK,
		memo: memo,
	}
	n := len(cell.Machines)
	if p.k <= 0 || p.k > n {
		p.k = n
	}
	p.buildMachines(memo)
	p.items = cell.Pending
	if len(cell.PendingAllocs) > 0 {
		p.items = slices.Clone(cell.Pending)
		for _, a := range cell.PendingAllocs {
			p.items = append(p.items, PendingTask{
				Ref:       TaskRef{User: a.Set.User, Job: a.Set.Name, Index: a.Index},
				Priority:  a.Priority,
				Seq:       a.Seq,
				Resources: a.Resources, Constraints: a.Constraints,
			})
		}
	}
	p.nTasks = len(cell.Pending)
	p.perm = make([]int32, n)
	for i := range p.perm {
		p.perm[i] = int32(i)
	}
	p.rng.Shuffle(n, func(i, j int) { p.perm[i], p.perm[j] = p.perm[j], p.perm[i] })
	return p
}

func (p *pass) buildMachines(memo *sumsMemo) {
	p.machines = make([]machine, len(p.cell.Machines))
	p.gens = make([]uint32, len(p.cell.Machines))
	var intern [2]map[string]int32
	for k := range intern {
		intern[k] = map[string]int32{}
	}
	var last, next map[*Machine]*machineSums
	if memo == nil {
		p.jobNumbers = newJobNumbers()
	} else {
		memo.mu.Lock()
		defer memo.mu.Unlock()
		// Jobs that ended keep their numbers; once they outnumber the
		// live ones, number afresh (and sum every machine again).
		if memo.jobs == nil || len(memo.jobs.ids) > 2*memo.refs+jobNumbersSlack {
			memo.jobs, memo.last = newJobNumbers(), nil
		}
		p.jobNumbers = memo.jobs
		last, next = memo.last, make(map[*Machine]*machineSums, len(p.cell.Machines))
	}
	refs := 0 // job numbers the machines' sums hold
	usableValues := [2]map[int32]bool{{}, {}}
	defer func() {
		for k := range usableValues {
			p.domainValues[k] = len(usableValues[k])
		}
	}()
	for i, in := range p.cell.Machines {
		m := &p.machines[i]
		m.in = in
		m.usable = in.State == MachineUp
		if m.usable {
			p.usable++
		}
		for k, attr := range p.cfg.SpreadDomains {
			m.domains[k] = -1
			if attr == "" {
				continue
			}
			if v, ok := in.Attributes[attr]; ok {
				id, seen := intern[k][v]
				if !seen {
					id = int32(len(intern[k]))
					intern[k][v] = id
				}
				m.domains[k] = id
				if m.usable {
					usableValues[k][id] = true
				}
			}
		}
		sums := last[in]
		if sums == nil {
			sums = sumMachine(in, p.jobNumbers)
		}
		if next != nil {
			next[in] = sums
		}
		refs += len(sums.jobs)
		m.start = sums
		m.usedLim, m.usedRes, m.npLim, m.npRes = sums.usedLim, sums.usedRes, sums.npLim, sums.npRes
		if len(sums.allocs) > 0 {
			m.allocs = slices.Clone(sums.allocs) // the pass fills them
		}
	}
	if memo != nil {
		memo.last, memo.refs = next, refs
	}
}

// sumMachine sums what a machine holds: its allocs, the tasks inside each,
// and the tasks on the machine directly.
func sumMachine(in *Machine, jobs *jobNumbers) *machineSums {
	m := &machineSums{jobs: make([]int32, 0, len(in.Tasks)+len(in.Allocs))}
	for j := range in.Tasks {
		r := &in.Tasks[j].Ref
		m.jobs = append(m.jobs, jobs.of(jobKey{r.User, r.Job, false}))
	}
	for j := range in.Allocs {
		s := &in.Allocs[j].Set
		m.jobs = append(m.jobs, jobs.of(jobKey{s.User, s.Name, true}))
	}
	for _, a := range in.Allocs {
		m.usedLim = m.usedLim.Add(a.Capacity)
		m.usedRes = m.usedRes.Add(a.Capacity)
		m.allocs = append(m.allocs, allocState{set: a.Set, index: a.Index, cap: a.Capacity})
	}
	alloc := func(set AllocSetRef, index int32) *allocState {
		for i := range m.allocs {
			if m.allocs[i].set == set && m.allocs[i].index == index {
				return &m.allocs[i]
			}
		}
		return nil
	}
	for j := range in.Tasks {
		t := &in.Tasks[j]
		if t.AllocSet != "" {
			if a := alloc(AllocSetRef{User: t.Ref.User, Name: t.AllocSet}, t.AllocIndex); a != nil {
				a.used = a.used.Add(t.Limit)
				continue
			}
			// An alloc the machine does not list: count the task on the
			// machine so that it is not forgotten.
		}
		lim, res := t.Limit, taskReservation(t)
		m.usedLim = m.usedLim.Add(lim)
		m.usedRes = m.usedRes.Add(res)
		if !IsProd(t.Priority) {
			m.npLim = m.npLim.Add(lim)
			m.npRes = m.npRes.Add(res)
		}
	}
	return m
}

// taskReservation is the reservation counted for a task: ports are never
// reclaimed, so they count at the limit.
func taskReservation(t *PlacedTask) Resources {
	r := t.Reservation
	r[Ports] = t.Limit[Ports]
	return r
}

func (m *machine) alloc(set AllocSetRef, index int32) *allocState {
	for i := range m.allocs {
		if m.allocs[i].set == set && m.allocs[i].index == index {
			return &m.allocs[i]
		}
	}
	return nil
}

func (m *machine) hasPackage(pkg string) bool {
	return slices.Contains(m.in.Packages, pkg) || slices.Contains(m.pkgs, pkg)
}

func (p *pass) machineIndex(name string) (int32, bool) {
	if p.byName == nil {
		p.byName = make(map[string]int32, len(p.machines))
		for i, m := range p.cell.Machines {
			p.byName[m.Name] = int32(i)
		}
	}
	i, ok := p.byName[name]
	return i, ok
}

// placeAll orders the queue, groups it into classes, then places tasks one
// by one; finish then explains the classes that kept tasks pending. It
// returns false when a rerun stopped early, having lost to the first run
// (reorder.go).
func (p *pass) placeAll() bool {
	pending := p.items
	p.plan.Stats.Pending = len(pending)
	p.sumDemand()
	order := queueOrder(pending, p.nTasks, p.sizes())
	if p.promote != nil {
		order = promoteFirst(order, p.promote)
	}
	p.buildClasses(order)
	p.recallInfeasible()
	p.buildJobs()
	anyScarce := slices.Contains(p.scarce[:], true)
	for _, c := range p.classes {
		for d := Dim(0); d < ScoredDims; d++ {
			c.wantsScarce = c.wantsScarce || (c.req[d] > 0 && p.scarce[d])
		}
		c.avoidsScarce = anyScarce && !c.wantsScarce && p.cfg.Policy == PolicyHybrid
	}
	if p.cfg.Policy == PolicyHybrid {
		p.buildDemand()
	}
	p.plan.Stats.Classes = len(p.classes)
	for _, ti := range order {
		c := p.classes[p.classOf[ti]]
		if c.exhausted && len(c.pool) == 0 {
			if p.leave(c, ti) {
				return false
			}
			continue
		}
		j := p.jobs[p.keyOf(ti)]
		best, score, examined := p.pick(c, j)
		if best < 0 {
			if p.leave(c, ti) {
				return false
			}
			continue
		}
		p.place(c, ti, j, c.pool[best], score, examined)
	}
	p.plan.Stats.Placed = len(p.plan.Placements) + len(p.plan.AllocPlacements)
	return true
}

// finish remembers what was found infeasible and explains the classes that
// kept tasks pending.
func (p *pass) finish() {
	p.rememberInfeasible()
	p.recallExplained()
	for _, c := range p.classes {
		if len(c.unplaced) > 0 {
			p.plan.Pending = append(p.plan.Pending, p.explain(c))
		}
	}
	p.rememberExplained()
}

// buildJobs counts where the jobs with pending tasks already have tasks.
func (p *pass) buildJobs() {
	p.jobs = map[jobKey]*jobSpread{}
	if p.memo != nil {
		p.memo.mu.Lock() // the numbering is the scheduler's
		defer p.memo.mu.Unlock()
	}
	// By number, the pending jobs that run somewhere: a job with no number
	// has no task on any machine of this pass.
	var byNumber []*jobSpread
	defer p.capJobs()
	for i := range p.items {
		k := p.keyOf(int32(i))
		if js := p.jobs[k]; js != nil {
			js.tasks++
			js.pack = js.pack || p.items[i].Pack
			continue
		}
		js := &jobSpread{tasks: 1, pack: p.items[i].Pack || p.cfg.packAll}
		p.jobs[k] = js
		if id, ok := p.jobNumbers.ids[k]; ok {
			if byNumber == nil {
				byNumber = make([]*jobSpread, len(p.jobNumbers.ids))
			}
			byNumber[id] = js
		}
	}
	if byNumber == nil {
		return
	}
	for mi := range p.machines {
		for _, id := range p.machines[mi].start.jobs {
			if int(id) < len(byNumber) {
				if js := byNumber[id]; js != nil {
					p.addToJob(js, int32(mi))
				}
			}
		}
	}
}

// capJobs sets each job's caps for spreading by default, once buildJobs
// has counted its tasks.
func (p *pass) capJobs() {
	for _, js := range p.jobs {
		js.tasks += js.placed
		if js.pack {
			continue
		}
		js.capMachine = int32(SpreadCap(int(js.tasks), p.usable, p.k))
		for k, n := range p.domainValues {
			if n > 1 {
				js.capDomain[k] = int32(SpreadCap(int(js.tasks), n, p.k))
			}
		}
	}
}

// SpreadCap is the most of a job's tasks that spreading by default wants
// on one machine (or one value of a failure-domain attribute) when the
// cell has slots of them up and the scheduler scores k feasible machines
// a task: ceil(tasks / min(slots, k)). A job of 3 on 10 machines wants
// one a machine; a job of 1,000 with K = 64 wants at most 16 a machine,
// which leaves a large job's packing to the policy's fit. Zero when there
// are no slots.
func SpreadCap(tasks, slots, k int) int {
	if k > 0 {
		slots = min(slots, k)
	}
	if slots <= 0 || tasks <= 0 {
		return 0
	}
	return (tasks + slots - 1) / slots
}

// spreadCosts is the failure-domain preference of machine mi for the
// next task of job js (spread) and, when capped, what spreading by default
// charges there (Weights.OverCap when the machine holds the job's cap of
// tasks, half that when one of its failure domains does): one lookup per
// map for both, as choose calls it for every pool entry.
func (p *pass) spreadCosts(js *jobSpread, mi int32, capped bool) (spread, overCap float64) {
	w := &p.cfg.Weights
	onMachine := js.machines[mi]
	s := w.SpreadMachine * float64(onMachine)
	full := capped && onMachine >= js.capMachine
	domainFull := false
	for k, d := range p.machines[mi].domains {
		if d < 0 {
			continue
		}
		if w.SpreadDomain[k] != 0 || capped && js.capDomain[k] > 0 {
			n := js.domains[k][d]
			s += w.SpreadDomain[k] * float64(n)
			domainFull = domainFull || capped && js.capDomain[k] > 0 && n >= js.capDomain[k]
		}
	}
	switch {
	case full:
		overCap = w.OverCap
	case domainFull:
		overCap = w.OverCap / 2
	}
	return -s / float64(js.placed), overCap
}

func (p *pass) addToJob(js *jobSpread, mi int32) {
	if js.machines == nil {
		js.machines = map[int32]int32{}
		js.domains = [2]map[int32]int32{{}, {}}
	}
	js.placed++
	js.machines[mi]++
	for k, d := range p.machines[mi].domains {
		if d >= 0 {
			js.domains[k][d]++
		}
	}
}

// spread is the failure-domain preference: minus the share of the job's
// placed tasks that already sit on the machine and in its domains.
func (p *pass) spread(js *jobSpread, mi int32) float64 {
	if js == nil || js.placed == 0 {
		return 0
	}
	w := &p.cfg.Weights
	n := float64(js.placed)
	s := w.SpreadMachine * float64(js.machines[mi])
	for k, d := range p.machines[mi].domains {
		if d >= 0 && w.SpreadDomain[k] != 0 {
			s += w.SpreadDomain[k] * float64(js.domains[k][d])
		}
	}
	return -s / n
}

// pick chooses the best machine for the next task of class c: it revalidates
// the pool's stale entries, tops the pool up to K feasible machines from the
// class's place in the random order, and takes the highest score. It returns
// -1 when no machine is feasible.
func (p *pass) pick(c *class, js *jobSpread) (best int, score float64, examined int32) {
	examined = p.refresh(c)
	best, score = p.choose(c, js, nil, false)
	p.spreadChose = p.spreadChose || p.spreadMoved
	return best, score, examined + int32(len(c.pool))
}

// refresh revalidates the pool's stale entries and tops it up to K
// feasible machines; it returns how many machines it rejected.
func (p *pass) refresh(c *class) (rejected int32) {
	n, hits, held := 0, 0, 0
	for i := range c.pool {
		e := &c.pool[i]
		if gen := p.gens[e.m]; e.gen == gen && e.scoresGen == p.scoresGen {
			hits++
		} else {
			p.plan.Stats.FeasibilityChecks++
			r := p.check(c, &p.machines[e.m], e.m, true)
			if !r.ok {
				rejected++ // dropped from the pool
				continue
			}
			*e = p.cand(e.m, gen, &r)
		}
		if e.holdsScarce {
			held++
		}
		if n != i {
			c.pool[n] = *e
		}
		n++
	}
	p.plan.Stats.ScoreCacheHits += hits
	c.pool = c.pool[:n]
	return rejected + p.fill(c, held)
}

// choose returns the pool's best entry for the next task of class c, of
// job js, leaving out the machines in except, and those that need a
// preemption when noVictims is set; -1 when there is none.
func (p *pass) choose(c *class, js *jobSpread, except []int32, noVictims bool) (best int, score float64) {
	best = -1
	p.spreadMoved = false
	if len(c.spread) > 0 && js != nil && js.placed > 0 {
		return p.pickSpread(c, js)
	}
	spread := js != nil && js.placed > 0
	// Spreading by default: a machine at the job's cap (SpreadCap), or in
	// a failure domain at its cap, pays for it in its score (spread.go).
	capped := spread && !js.pack && js.capMachine > 0
	byScore, topScore := best, 0.0 // the pick without the caps
	for i := range c.pool {
		e := &c.pool[i]
		if (noVictims && e.victims >= 0) || (len(except) > 0 && slices.Contains(except, e.m)) {
			continue
		}
		s := e.score
		if spread {
			sp, over := p.spreadCosts(js, e.m, capped)
			s += sp
			if capped {
				if byScore < 0 || s > topScore {
					byScore, topScore = i, s
				}
				s -= over
			}
		}
		if best < 0 || s > score {
			best, score = i, s
		}
	}
	p.spreadMoved = capped && best != byScore
	return best, score
}

// pickSpread chooses, for a class whose job spreads across attributes, the
// pool's machine whose values hold the fewest of the job's tasks (by the
// first attribute, then the next), the best score among those.
func (p *pass) pickSpread(c *class, js *jobSpread) (best int, score float64) {
	counts := make([]map[string]int32, len(c.spread))
	for k, attr := range c.spread {
		counts[k] = map[string]int32{}
		for mi, n := range js.machines {
			counts[k][p.machines[mi].in.Attributes[attr]] += n
		}
	}
	best = -1
	var bestCounts []int32
	cur := make([]int32, len(c.spread))
	for i := range c.pool {
		e := &c.pool[i]
		for k, attr := range c.spread {
			cur[k] = counts[k][p.machines[e.m].in.Attributes[attr]]
		}
		s := e.score + p.spread(js, e.m)
		order := 0
		if best >= 0 {
			order = slices.Compare(cur, bestCounts)
		}
		if best < 0 || order < 0 || (order == 0 && s > score) {
			best, score, bestCounts = i, s, slices.Clone(cur)
		}
	}
	return best, score
}

func (p *pass) cand(mi int32, gen uint32, r *checkResult) cand {
	e := cand{m: mi, gen: gen, scoresGen: p.scoresGen, alloc: r.alloc, score: r.score, victims: -1, holdsScarce: r.holdsScarce}
	if r.victims != nil {
		e.victims = int32(len(p.victimSets))
		p.victimSets = append(p.victimSets, r.victims)
	}
	return e
}

// fill scans the class's random order for feasible machines until the pool
// holds K (scarcePool times K for a class asking for a scarce resource,
// every feasible machine for a spreading job; for a class avoiding one, K
// counting each of the held entries that keep scarce room free as
// 1/scarcePool) or every machine has been examined once. It returns how
// many machines it rejected.
func (p *pass) fill(c *class, held int) (rejected int32) {
	n := len(p.perm)
	k := p.k
	switch {
	case len(c.spread) > 0:
		k = n // an even spread needs every value in view
	case c.wantsScarce:
		// A scarce resource needs the machine that strands the least of
		// it: a larger sample (scarceShare).
		k = min(n, scarcePool*k)
	}
	// A class that asks for no scarce resource counts a machine keeping
	// some free as 1/scarcePool of a machine, up to scarcePool times K:
	// its pool must not drift to such machines only (scarceHeld).
	clean := len(c.pool) - held
	if c.avoidsScarce {
		k = min(n, scarcePool*k)
	}
	for len(c.pool) < k && c.scanned < n && (!c.avoidsScarce || clean*scarcePool+held < k) {
		mi := p.perm[(c.start+c.scanned)%n]
		c.scanned++
		if p.gens[mi] == 0 && c.known.has(mi) {
			p.plan.Stats.InfeasibleRemembered++
			rejected++
			continue
		}
		p.plan.Stats.FeasibilityChecks++
		m := &p.machines[mi]
		r := p.check(c, m, mi, true)
		if r.ok {
			c.pool = append(c.pool, p.cand(mi, p.gens[mi], &r))
			if r.holdsScarce {
				held++
			} else {
				clean++
			}
		} else {
			rejected++
			if p.memo != nil && p.gens[mi] == 0 {
				c.rejected = append(c.rejected, mi)
			}
			p.noteContested(c, mi, &r)
		}
	}
	if c.scanned >= n {
		c.exhausted = true
	}
	return rejected
}

// place commits the feasible machine e of class c to queue item ti.
func (p *pass) place(c *class, ti int32, js *jobSpread, e cand, score float64, examined int32) {
	t := &p.items[ti]
	m := &p.machines[e.m]
	beforeLim, beforeRes := m.in.Capacity.Sub(m.usedLim), m.in.Capacity.Sub(m.usedRes)
	if c.isAlloc {
		set := AllocSetRef{User: t.Ref.User, Name: t.Ref.Job}
		m.allocs = append(m.allocs, allocState{set: set, index: t.Ref.Index, cap: c.req})
		m.usedLim = m.usedLim.Add(c.req)
		m.usedRes = m.usedRes.Add(c.req)
		p.plan.AllocPlacements = append(p.plan.AllocPlacements, AllocPlacement{
			Alloc: AllocRef{Set: set, Index: t.Ref.Index}, Machine: m.in.Name, MachineVersion: m.in.Version,
			Score: score, MachinesExamined: examined, Before: len(p.plan.Placements),
		})
		p.changed(c, m, e.m, js, &beforeLim, &beforeRes)
		return
	}
	pl := Placement{
		Task:             t.Ref,
		SpecVersion:      t.SpecVersion,
		Machine:          m.in.Name,
		MachineVersion:   m.in.Version,
		Score:            score,
		MachinesExamined: examined,
	}
	if e.victims >= 0 {
		for _, vi := range p.victimSets[e.victims] {
			p.evict(m, vi)
			pl.Preempted = append(pl.Preempted, m.in.Tasks[vi].Ref)
		}
		p.plan.Stats.Preemptions += len(pl.Preempted)
	}
	req := c.req
	if c.inAlloc {
		a := &m.allocs[e.alloc]
		a.used = a.used.Add(req)
		pl.AllocSet = c.allocSet.Name
		pl.AllocIndex = a.index
	} else {
		m.usedLim = m.usedLim.Add(req)
		m.usedRes = m.usedRes.Add(req)
		if !c.prod {
			m.npLim = m.npLim.Add(req)
			m.npRes = m.npRes.Add(req)
		}
	}
	if n := req[Ports]; n > 0 {
		pl.Ports = m.takePorts(int(n))
	}
	if c.pkg != "" && !m.hasPackage(c.pkg) {
		m.pkgs = append(m.pkgs, c.pkg)
	}
	p.plan.Placements = append(p.plan.Placements, pl)
	p.planned = append(p.planned, planned{ti: ti, mi: e.m})
	p.changed(c, m, e.m, js, &beforeLim, &beforeRes)
}

// changed records that a task or alloc of class c was placed on machine mi:
// the machine's cached scores go stale, the job's spread and the hybrid
// policy's demand picture move.
func (p *pass) changed(c *class, m *machine, mi int32, js *jobSpread, beforeLim, beforeRes *Resources) {
	if js != nil {
		p.addToJob(js, mi)
	}
	if p.cfg.Policy == PolicyHybrid && p.demand.placed(c.id) {
		p.scoresGen++
	}
	p.roomChanged(m, mi, beforeLim, beforeRes)
}

// roomChanged records that machine mi's free room moved from before (per
// accounting): its cached scores go stale, and the hybrid policy's large
// shapes recount their slots.
func (p *pass) roomChanged(m *machine, mi int32, beforeLim, beforeRes *Resources) {
	p.gens[mi]++
	if p.cfg.Policy != PolicyHybrid {
		return
	}
	afterLim, afterRes := m.in.Capacity.Sub(m.usedLim), m.in.Capacity.Sub(m.usedRes)
	if m.usable && p.demand.machineChanged(beforeLim, beforeRes, &afterLim, &afterRes) {
		p.scoresGen++
	}
}

// evict removes task vi of the input from the machine's sums.
func (p *pass) evict(m *machine, vi int32) {
	if m.evicted == nil {
		m.evicted = make([]bool, len(m.in.Tasks))
	}
	m.evicted[vi] = true
	t := &m.in.Tasks[vi]
	lim, res := t.Limit, taskReservation(t)
	m.usedLim = m.usedLim.Sub(lim)
	m.usedRes = m.usedRes.Sub(res)
	if !IsProd(t.Priority) {
		m.npLim = m.npLim.Sub(lim)
		m.npRes = m.npRes.Sub(res)
	}
	if m.ports != nil {
		for _, port := range t.Ports {
			if i, ok := slices.BinarySearch(m.ports, port); ok {
				m.ports = slices.Delete(m.ports, i, i+1)
			}
		}
	}
}

// takePorts hands out the n lowest free ports of the machine's range.
func (m *machine) takePorts(n int) []int32 {
	if m.ports == nil {
		m.ports = []int32{}
		for i := range m.in.Tasks {
			if m.evicted == nil || !m.evicted[i] {
				m.ports = append(m.ports, m.in.Tasks[i].Ports...)
			}
		}
		slices.Sort(m.ports)
	}
	out := make([]int32, 0, n)
	port := m.in.PortBase
	for len(out) < n {
		if _, used := slices.BinarySearch(m.ports, port); !used {
			out = append(out, port)
		}
		port++
	}
	for _, port := range out {
		i, _ := slices.BinarySearch(m.ports, port)
		m.ports = slices.Insert(m.ports, i, port)
	}
	return out
}
