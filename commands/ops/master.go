package ops

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corralhq/corral/commands/master"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
	"github.com/corralhq/corral/scheduler"
)

// Master is the metrics of one master replica. Create it before the
// master (its hooks go into SchedulerConfig.Metrics and LinkConfig.Metrics,
// its interceptors into the gRPC server), then Watch the master.
type Master struct {
	reg prometheus.Registerer

	passDuration prometheus.Histogram
	passes       prometheus.Counter
	placed       *prometheus.CounterVec // kind: task, alloc
	preemptions  prometheus.Counter

	pollInterval prometheus.Histogram
	pollDuration prometheus.Histogram
	polls        *prometheus.CounterVec // result

	api    *prometheus.CounterVec   // service, method, code
	apiDur *prometheus.HistogramVec // service, method

	mu        sync.Mutex
	byReason  map[string]int // pending tasks of the latest pass by reason
	consumers map[string]func(context.Context) (int64, error)
}

// NewMaster returns the metrics of a master replica, registered in reg.
func NewMaster(reg prometheus.Registerer) *Master {
	mm := &Master{
		reg: reg,
		passDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "corral_scheduler_pass_duration_seconds",
			Help:    "Time of one scheduling pass (feasibility, scoring, preemption) over the cell.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 3, 12)}),
		passes: prometheus.NewCounter(prometheus.CounterOpts{Name: "corral_scheduler_passes_total",
			Help: "Scheduling passes run by this replica while it led."}),
		placed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corral_scheduler_placed_total",
			Help: "Placements the scheduler proposed, by kind (task, alloc); the write path refuses stale ones, which later passes place again."},
			[]string{"kind"}),
		preemptions: prometheus.NewCounter(prometheus.CounterOpts{Name: "corral_scheduler_preemptions_total",
			Help: "Tasks the scheduler proposed to evict to make room for higher-priority ones."}),
		pollInterval: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "corral_link_poll_interval_seconds",
			Help:    "Time between consecutive answered polls of a machine (Borg: every few seconds).",
			Buckets: []float64{.1, .25, .5, 1, 2, 3, 5, 10, 20, 30, 60}}),
		pollDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "corral_link_poll_duration_seconds",
			Help:    "Time of one answered poll of an agent, from sending its requests to its full state.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 3, 11)}),
		polls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corral_link_polls_total",
			Help: "Polls of agents by result: answered or missed."}, []string{"result"}),
		api: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corral_api_requests_total",
			Help: "Cell API and agent registration requests by service, method and gRPC code."}, []string{"service", "method", "code"}),
		apiDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "corral_api_request_duration_seconds",
			Help:    "Latency of API requests (whole stream for streaming methods) by service and method.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 3, 12)}, []string{"service", "method"}),
		byReason:  map[string]int{},
		consumers: map[string]func(context.Context) (int64, error){},
	}
	mm.passDuration = register(reg, mm.passDuration)
	mm.passes = register(reg, mm.passes)
	mm.placed = register(reg, mm.placed)
	mm.preemptions = register(reg, mm.preemptions)
	mm.pollInterval = register(reg, mm.pollInterval)
	mm.pollDuration = register(reg, mm.pollDuration)
	mm.polls = register(reg, mm.polls)
	mm.api = register(reg, mm.api)
	mm.apiDur = register(reg, mm.apiDur)
	// The series exist from the start, at 0.
	mm.placed.WithLabelValues("task")
	mm.placed.WithLabelValues("alloc")
	mm.polls.WithLabelValues("answered")
	mm.polls.WithLabelValues("missed")
	return mm
}

var (
	_ master.SchedulerMetrics = (*Master)(nil)
	_ master.LinkMetrics      = (*Master)(nil)
)

// PassDone implements master.SchedulerMetrics.
func (mm *Master) PassDone(took time.Duration, plan *scheduler.Plan) {
	mm.passes.Inc()
	mm.passDuration.Observe(took.Seconds())
	mm.placed.WithLabelValues("task").Add(float64(len(plan.Placements)))
	mm.placed.WithLabelValues("alloc").Add(float64(len(plan.AllocPlacements)))
	pre := 0
	for _, p := range plan.Placements {
		pre += len(p.Preempted)
	}
	mm.preemptions.Add(float64(pre))
	by := map[string]int{}
	for _, ex := range plan.Pending {
		if n := len(ex.Tasks); n > 0 {
			by[reasonOf(ex)] += n
		}
	}
	mm.mu.Lock()
	mm.byReason = by
	mm.mu.Unlock()
}

// reasonOf is the main reason a class of tasks stays pending: the one that
// rejected the most machines.
func reasonOf(ex scheduler.Explanation) string {
	if ex.Machines == 0 {
		return "no_machines"
	}
	if len(ex.Rejections) == 0 {
		return "other"
	}
	best := ex.Rejections[0]
	for _, r := range ex.Rejections[1:] {
		if r.Machines > best.Machines {
			best = r
		}
	}
	return reasonLabel(best.Reason)
}

func reasonLabel(r scheduler.Reason) string {
	switch r {
	case scheduler.ReasonDown:
		return "machine_down"
	case scheduler.ReasonDraining:
		return "machine_draining"
	case scheduler.ReasonCrashedHere:
		return "crashed_here"
	case scheduler.ReasonConstraint:
		return "constraint"
	case scheduler.ReasonNoAlloc:
		return "alloc_not_on_machine"
	case scheduler.ReasonAllocFull:
		return "alloc_full"
	case scheduler.ReasonCPU:
		return "cpu"
	case scheduler.ReasonMemory:
		return "memory"
	case scheduler.ReasonDisk:
		return "disk"
	case scheduler.ReasonGPU:
		return "gpu"
	case scheduler.ReasonPorts:
		return "ports"
	}
	return "other"
}

// PollDone implements master.LinkMetrics.
func (mm *Master) PollDone(_ string, took, interval time.Duration, err error) {
	if err != nil {
		mm.polls.WithLabelValues("missed").Inc()
		return
	}
	mm.polls.WithLabelValues("answered").Inc()
	mm.pollDuration.Observe(took.Seconds())
	if interval > 0 {
		mm.pollInterval.Observe(interval.Seconds())
	}
}

// Consumer adds a reader of the log whose position and lag behind the head
// are reported as corral_consumer_position and corral_consumer_lag_events
// (the Infrastore: its Position). The projection is always reported, as
// consumer "projection".
func (mm *Master) Consumer(name string, position func(context.Context) (int64, error)) {
	mm.mu.Lock()
	defer mm.mu.Unlock()
	mm.consumers[name] = position
}

// Watch registers the collector that reads m's state, and the head of the
// store it writes, when scraped.
func (mm *Master) Watch(m *master.Master) {
	register(mm.reg, &stateCollector{mm: mm, m: m})
}

type stateCollector struct {
	mm *Master
	m  *master.Master
}

var (
	descLeader       = prometheus.NewDesc("corral_master_leader", "1 while this replica holds the leader lease, else 0.", nil, nil)
	descEpoch        = prometheus.NewDesc("corral_master_epoch", "Epoch of the lease this replica holds (0 when it does not lead).", nil, nil)
	descLeaderEpoch  = prometheus.NewDesc("corral_cell_leader_epoch", "Epoch of the cell's leader as the log records it (LeaderElected).", nil, nil)
	descLeaderKnown  = prometheus.NewDesc("corral_cell_leader_known", "1 when the log names a leader.", nil, nil)
	descHead         = prometheus.NewDesc("corral_log_head_position", "Position of the last event committed to the cell's log.", nil, nil)
	descStoreUp      = prometheus.NewDesc("corral_store_up", "1 when the event store answered the scrape's head read, else 0.", nil, nil)
	descConsumerPos  = prometheus.NewDesc("corral_consumer_position", "Last log position a consumer applied (projection: this replica's state).", []string{"consumer"}, nil)
	descConsumerLag  = prometheus.NewDesc("corral_consumer_lag_events", "Events a consumer has yet to apply: head minus its position.", []string{"consumer"}, nil)
	descConsumerUp   = prometheus.NewDesc("corral_consumer_up", "1 when the consumer's position could be read.", []string{"consumer"}, nil)
	descTasks        = prometheus.NewDesc("corral_tasks", "Tasks of live jobs by priority band and state (pending, scheduled, running).", []string{"band", "state"}, nil)
	descPendingWhy   = prometheus.NewDesc("corral_tasks_pending_by_reason", "Pending tasks by the main reason of the latest scheduling pass (the rejection that ruled out most machines); waiting: not considered by a pass yet.", []string{"reason"}, nil)
	descJobs         = prometheus.NewDesc("corral_jobs", "Jobs by state (pending, running, dead).", []string{"state"}, nil)
	descMachines     = prometheus.NewDesc("corral_machines", "Machines by state: up, down (missed their polls), draining (up, taking no new work).", []string{"state"}, nil)
	descSkipped      = prometheus.NewDesc("corral_projection_skipped_events", "Events the projection skipped as naming something unknown; non-zero means a writer bug.", nil, nil)
	descMaxSkew      = prometheus.NewDesc("corral_link_clock_skew_max_seconds", "Largest absolute clock skew between this leader and an agent, at their last polls.", nil, nil)
	descUnpolled     = prometheus.NewDesc("corral_link_machines_missing_polls", "Machines whose latest polls went unanswered.", nil, nil)
	descLossHeld     = prometheus.NewDesc("corral_link_machine_loss_held", "1 while this leader's link holds machine loss: so many machines miss their polls at once that the fault is taken for the master's or the network's, and none is marked down.", nil, nil)
	stateDescs       = []*prometheus.Desc{descLeader, descEpoch, descLeaderEpoch, descLeaderKnown, descHead, descStoreUp, descConsumerPos, descConsumerLag, descConsumerUp, descTasks, descPendingWhy, descJobs, descMachines, descSkipped, descMaxSkew, descUnpolled, descLossHeld}
	allPendingReason = []string{"machine_down", "machine_draining", "crashed_here", "constraint", "alloc_not_on_machine", "alloc_full", "cpu", "memory", "disk", "gpu", "ports", "no_machines", "other", "waiting"}
)

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range stateDescs {
		ch <- d
	}
}

// scrapeTimeout bounds the store reads of one scrape.
const scrapeTimeout = 2 * time.Second

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(descLeader, boolGauge(c.m.Leading()))
	gauge(descEpoch, float64(c.m.Epoch()))
	cc := c.count()
	cc.emit(gauge)
	c.collectPendingWhy(gauge, cc.pending)
	if c.m.Leading() {
		c.collectAgents(gauge, cc.names)
	}
	c.collectStore(gauge, cc.position)
}

// sendGauge sends one gauge's value to the scrape.
type sendGauge func(d *prometheus.Desc, v float64, labels ...string)

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

type bandState struct {
	band  projections.Band
	state projections.TaskState
}

// cellCounts is what one look at the projection counts.
type cellCounts struct {
	tasks                          map[bandState]int
	jobs                           map[projections.JobState]int
	machines                       map[string]int
	position, skipped, leaderEpoch int64
	leaderKnown                    bool
	pending                        int
	names                          []string
}

// count counts tasks by band and state, jobs by state and machines by
// state in one view of the projection.
func (c *stateCollector) count() cellCounts {
	cc := cellCounts{tasks: map[bandState]int{}, jobs: map[projections.JobState]int{},
		machines: map[string]int{"up": 0, "down": 0, "draining": 0}}
	c.m.View(func(s *projections.State) {
		cc.position, cc.skipped, cc.leaderEpoch, cc.leaderKnown = s.Position, s.Skipped, s.LeaderEpoch, s.Leader != ""
		cc.pending = s.PendingCount()
		s.RangePending(func(t *projections.Task) bool {
			cc.tasks[bandState{projections.BandOf(t.Priority()), projections.TaskPending}]++
			return true
		})
		for _, j := range s.Jobs {
			cc.jobs[j.State()]++
		}
		for name, m := range s.Machines {
			switch {
			case m.State == projections.MachineDown:
				cc.machines["down"]++
			case m.Draining:
				cc.machines["draining"]++
			default:
				cc.machines["up"]++
			}
			m.RangeTasks(func(t *projections.Task) bool {
				if t.State == projections.TaskScheduled || t.State == projections.TaskRunning {
					cc.tasks[bandState{projections.BandOf(t.Priority()), t.State}]++
				}
				return true
			})
			cc.names = append(cc.names, name)
		}
	})
	return cc
}

// emit sends the counts, zeros included, so that every series exists.
func (cc cellCounts) emit(gauge sendGauge) {
	for _, b := range projections.Bands {
		for _, st := range []projections.TaskState{projections.TaskPending, projections.TaskScheduled, projections.TaskRunning} {
			gauge(descTasks, float64(cc.tasks[bandState{b, st}]), b.String(), st.String())
		}
	}
	for _, st := range []projections.JobState{projections.JobPending, projections.JobRunning, projections.JobDead} {
		gauge(descJobs, float64(cc.jobs[st]), st.String())
	}
	for _, st := range []string{"up", "down", "draining"} {
		gauge(descMachines, float64(cc.machines[st]), st)
	}
	gauge(descSkipped, float64(cc.skipped))
	gauge(descLeaderEpoch, float64(cc.leaderEpoch))
	gauge(descLeaderKnown, boolGauge(cc.leaderKnown))
}

// collectPendingWhy sends the pending tasks by the reason the last pass
// gave; those it has not explained yet are waiting.
func (c *stateCollector) collectPendingWhy(gauge sendGauge, pending int) {
	c.mm.mu.Lock()
	by := make(map[string]int, len(c.mm.byReason))
	explained := 0
	for r, n := range c.mm.byReason {
		by[r] = n
		explained += n
	}
	c.mm.mu.Unlock()
	if pending == 0 {
		clear(by)
	} else if explained < pending {
		by["waiting"] = pending - explained
	}
	for _, r := range allPendingReason {
		gauge(descPendingWhy, float64(by[r]), r)
	}
}

// collectAgents sends what the leader's link knows of the machines' agents.
func (c *stateCollector) collectAgents(gauge sendGauge, names []string) {
	var maxSkew time.Duration
	missing := 0
	for _, name := range names {
		seen, ok := c.m.Agent(name)
		if !ok {
			continue
		}
		maxSkew = max(maxSkew, seen.ClockSkew.Abs())
		if seen.MissedPolls > 0 {
			missing++
		}
	}
	gauge(descMaxSkew, maxSkew.Seconds())
	gauge(descUnpolled, float64(missing))
	_, held := c.m.LossHold()
	gauge(descLossHeld, boolGauge(held))
}

// collectStore sends the store's head and how far each consumer of the log,
// the projection at position first, is behind it.
func (c *stateCollector) collectStore(gauge sendGauge, position int64) {
	c.mm.mu.Lock()
	consumers := make(map[string]func(context.Context) (int64, error), len(c.mm.consumers))
	for n, f := range c.mm.consumers {
		consumers[n] = f
	}
	c.mm.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	head, err := c.m.Store().Head(ctx)
	if err != nil {
		gauge(descStoreUp, 0)
		head = -1
	} else {
		gauge(descStoreUp, 1)
		gauge(descHead, float64(head))
	}
	consumer := func(name string, pos int64, err error) {
		if err != nil {
			gauge(descConsumerUp, 0, name)
			return
		}
		gauge(descConsumerUp, 1, name)
		gauge(descConsumerPos, float64(pos), name)
		if head >= 0 {
			gauge(descConsumerLag, float64(max(head-pos, 0)), name)
		}
	}
	consumer("projection", position, nil)
	for name, f := range consumers {
		pos, err := f(ctx)
		consumer(name, pos, err)
	}
}

// headOf reads the head with the scrape's timeout.
func headOf(ctx context.Context, store events.Log) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, scrapeTimeout)
	defer cancel()
	return store.Head(ctx)
}
