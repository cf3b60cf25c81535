package agent

import (
	"cmp"
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corralhq/corral/agent/agentpb"
	"github.com/corralhq/corral/events"
)

// metrics counts what the agent did. Counters live here, updated where the
// thing happens; gauges are read from the agent's state when scraped.
type metrics struct {
	events         *prometheus.CounterVec // kind, reason
	restarts       *prometheus.CounterVec // band
	oomKills       *prometheus.CounterVec // band
	healthFailures *prometheus.CounterVec // band
	pollInterval   prometheus.Histogram
	pollDuration   prometheus.Histogram
}

// counted are the metrics the agent counts as things happen, described
// and collected with those read from its state.
func (m *metrics) counted() []prometheus.Collector {
	return []prometheus.Collector{m.events, m.restarts, m.oomKills, m.healthFailures, m.pollInterval, m.pollDuration}
}

func newMetrics() *metrics {
	m := &metrics{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corral_agent_task_events_total",
			Help: "Task events the agent emitted, by kind (started, finished, failed, evicted, killed, adopted) and reason."}, []string{"kind", "reason"}),
		restarts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corral_agent_task_restarts_total",
			Help: "Tasks restarted in place by their restart policy, by priority band."}, []string{"band"}),
		oomKills: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corral_agent_oom_kills_total",
			Help: "Tasks killed at their memory limit (by the kernel or the agent), by priority band."}, []string{"band"}),
		healthFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corral_agent_health_check_failures_total",
			Help: "Failed HTTP health checks of tasks, by priority band."}, []string{"band"}),
		pollInterval: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "corral_agent_poll_interval_seconds",
			Help:    "Time between consecutive polls by the master, as the agent sees it.",
			Buckets: []float64{.1, .25, .5, 1, 2, 3, 5, 10, 20, 30, 60, 120}}),
		pollDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "corral_agent_poll_duration_seconds",
			Help:    "Time the agent took to apply a poll's requests and answer it (its state saved first).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 9)}),
	}
	// Every band's series exists from the start, at 0, so a rate over it
	// is 0 rather than no data.
	for _, b := range events.Bands {
		m.restarts.WithLabelValues(b.String())
		m.oomKills.WithLabelValues(b.String())
		m.healthFailures.WithLabelValues(b.String())
	}
	return m
}

func bandOf(priority int32) string { return events.BandOf(priority).String() }

// event counts an emitted event. a.mu held.
func (m *metrics) event(ev *agentpb.AgentEvent, priority int32) {
	m.events.WithLabelValues(eventKindName(ev.Kind), ev.Reason).Inc()
	if ev.Kind == agentpb.EventKind_EVENT_KIND_EVICTED && ev.Reason == ReasonOOM {
		m.oomKills.WithLabelValues(bandOf(priority)).Inc()
	}
}

// timePoll records how long a poll that started at start took.
func (m *metrics) timePoll(start time.Time) {
	m.pollDuration.Observe(time.Since(start).Seconds())
}

// polled records a poll that arrived at now, the previous one at last.
func (m *metrics) polled(now, last time.Time) {
	if !last.IsZero() && now.After(last) {
		m.pollInterval.Observe(now.Sub(last).Seconds())
	}
}

func eventKindName(k agentpb.EventKind) string {
	switch k {
	case agentpb.EventKind_EVENT_KIND_STARTED:
		return "started"
	case agentpb.EventKind_EVENT_KIND_FINISHED:
		return "finished"
	case agentpb.EventKind_EVENT_KIND_FAILED:
		return "failed"
	case agentpb.EventKind_EVENT_KIND_EVICTED:
		return "evicted"
	case agentpb.EventKind_EVENT_KIND_KILLED:
		return "killed"
	case agentpb.EventKind_EVENT_KIND_ADOPTED:
		return "adopted"
	}
	return "unknown"
}

var taskStates = []agentpb.TaskState{
	agentpb.TaskState_TASK_STATE_STARTING, agentpb.TaskState_TASK_STATE_RUNNING, agentpb.TaskState_TASK_STATE_BACKOFF,
	agentpb.TaskState_TASK_STATE_STOPPING, agentpb.TaskState_TASK_STATE_FINISHED, agentpb.TaskState_TASK_STATE_FAILED,
	agentpb.TaskState_TASK_STATE_KILLED, agentpb.TaskState_TASK_STATE_EVICTED,
}

// TaskStateName is a task state as metrics and people name it: "running",
// "backoff", ...
func TaskStateName(s agentpb.TaskState) string {
	switch s {
	case agentpb.TaskState_TASK_STATE_STARTING:
		return "starting"
	case agentpb.TaskState_TASK_STATE_RUNNING:
		return "running"
	case agentpb.TaskState_TASK_STATE_BACKOFF:
		return "backoff"
	case agentpb.TaskState_TASK_STATE_STOPPING:
		return "stopping"
	case agentpb.TaskState_TASK_STATE_FINISHED:
		return "finished"
	case agentpb.TaskState_TASK_STATE_FAILED:
		return "failed"
	case agentpb.TaskState_TASK_STATE_KILLED:
		return "killed"
	case agentpb.TaskState_TASK_STATE_EVICTED:
		return "evicted"
	}
	return "unknown"
}

var (
	descTasks = prometheus.NewDesc("corral_agent_tasks",
		"Tasks the agent holds, by state.", []string{"state"}, nil)
	descCPU = prometheus.NewDesc("corral_agent_task_cpu_seconds_total",
		"CPU core-seconds used by the tasks of a job on this machine (cgroup or /proc counters; summed over the job's tasks, so it drops when a task is forgotten).",
		[]string{"user", "job", "band"}, nil)
	descMemory = prometheus.NewDesc("corral_agent_task_memory_bytes",
		"Memory in use by the running tasks of a job on this machine, at the latest sample.", []string{"user", "job", "band"}, nil)
	descMemoryLimit = prometheus.NewDesc("corral_agent_task_memory_limit_bytes",
		"Memory limits of the live tasks of a job on this machine.", []string{"user", "job", "band"}, nil)
	descMachineMem = prometheus.NewDesc("corral_agent_machine_memory_bytes",
		"The machine's memory: total and available (from /proc/meminfo) and used by tasks.", []string{"kind"}, nil)
	descCapacity = prometheus.NewDesc("corral_agent_capacity",
		"What the machine offers to tasks: cpu in cores, memory and disk in bytes, ports.", []string{"resource"}, nil)
	descLastPoll = prometheus.NewDesc("corral_agent_last_poll_age_seconds",
		"Seconds since the master last polled this agent (-1: never since it started).", nil, nil)
	descEpoch = prometheus.NewDesc("corral_agent_master_epoch",
		"Highest master epoch this agent has seen.", nil, nil)
	descUnacked = prometheus.NewDesc("corral_agent_events_unacknowledged",
		"Events the master has not acknowledged yet.", nil, nil)
	descDropped = prometheus.NewDesc("corral_agent_events_dropped_total",
		"Unacknowledged events dropped because the buffer was full.", nil, nil)
	descInfo = prometheus.NewDesc("corral_agent_info",
		"Always 1; labels describe the agent: cgroup mode (v1, v2, sampling) and incarnation.", []string{"cgroup_mode", "incarnation"}, nil)
)

// agentCollector reads the agent's state when scraped.
type agentCollector struct{ a *Agent }

// Collector returns the agent's Prometheus metrics: counters of what it did
// (events, restarts, OOM kills, health-check failures, polls) and gauges
// read from its state when scraped (tasks by state, CPU and memory per job
// and band, the machine's memory, the last poll's age). Labels are bounded:
// per job and band, never per task index. Several agents in one process
// register theirs under a constant "machine" label
// (prometheus.WrapRegistererWith).
func (a *Agent) Collector() prometheus.Collector { return agentCollector{a} }

func (c agentCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, col := range c.a.metrics.counted() {
		col.Describe(ch)
	}
	for _, d := range []*prometheus.Desc{descTasks, descCPU, descMemory, descMemoryLimit, descMachineMem, descCapacity,
		descLastPoll, descEpoch, descUnacked, descDropped, descInfo} {
		ch <- d
	}
}

type jobBand struct{ user, job, band string }

func (c agentCollector) Collect(ch chan<- prometheus.Metric) {
	for _, col := range c.a.metrics.counted() {
		col.Collect(ch)
	}

	c.a.mu.Lock()
	lastPoll := c.a.lastPoll
	now := c.a.clock.Now()
	c.a.mu.Unlock()
	st := c.a.State()

	byState := map[agentpb.TaskState]int{}
	cpu, mem, limit := map[jobBand]float64{}, map[jobBand]float64{}, map[jobBand]float64{}
	usage := map[string]*agentpb.TaskUsageSample{}
	for _, u := range st.Usage {
		usage[TaskKey(u.Task)] = u
	}
	for _, t := range st.Tasks {
		byState[t.State]++
		k := jobBand{t.Task.GetUser(), t.Task.GetJob(), bandOf(t.Priority)}
		live := t.State == agentpb.TaskState_TASK_STATE_RUNNING || t.State == agentpb.TaskState_TASK_STATE_STARTING ||
			t.State == agentpb.TaskState_TASK_STATE_STOPPING || t.State == agentpb.TaskState_TASK_STATE_BACKOFF
		if live {
			limit[k] += float64(t.Resources.GetMemoryBytes())
		}
		if u := usage[TaskKey(t.Task)]; u != nil {
			cpu[k] += u.CpuCoreSecondsTotal
			if t.Pid != 0 {
				mem[k] += float64(u.MemoryBytes)
			}
		}
		if _, ok := mem[k]; !ok && live {
			mem[k] = 0 // started but not sampled yet
		}
	}
	for _, s := range taskStates {
		ch <- prometheus.MustNewConstMetric(descTasks, prometheus.GaugeValue, float64(byState[s]), TaskStateName(s))
	}
	for k, v := range cpu {
		ch <- prometheus.MustNewConstMetric(descCPU, prometheus.CounterValue, v, k.user, k.job, k.band)
	}
	for k, v := range mem {
		ch <- prometheus.MustNewConstMetric(descMemory, prometheus.GaugeValue, v, k.user, k.job, k.band)
	}
	for k, v := range limit {
		ch <- prometheus.MustNewConstMetric(descMemoryLimit, prometheus.GaugeValue, v, k.user, k.job, k.band)
	}
	if mu := st.MachineUsage; mu != nil {
		ch <- prometheus.MustNewConstMetric(descMachineMem, prometheus.GaugeValue, float64(mu.MemoryTotalBytes), "total")
		ch <- prometheus.MustNewConstMetric(descMachineMem, prometheus.GaugeValue, float64(mu.MemoryAvailableBytes), "available")
		ch <- prometheus.MustNewConstMetric(descMachineMem, prometheus.GaugeValue, float64(mu.TasksMemoryBytes), "tasks")
	}
	if cp := st.Capacity; cp != nil {
		ch <- prometheus.MustNewConstMetric(descCapacity, prometheus.GaugeValue, float64(cp.CpuMilli)/1000, "cpu")
		ch <- prometheus.MustNewConstMetric(descCapacity, prometheus.GaugeValue, float64(cp.MemoryBytes), "memory")
		ch <- prometheus.MustNewConstMetric(descCapacity, prometheus.GaugeValue, float64(cp.DiskBytes), "disk")
		ch <- prometheus.MustNewConstMetric(descCapacity, prometheus.GaugeValue, float64(cp.Ports), "ports")
	}
	age := -1.0
	if !lastPoll.IsZero() {
		age = now.Sub(lastPoll).Seconds()
	}
	ch <- prometheus.MustNewConstMetric(descLastPoll, prometheus.GaugeValue, age)
	ch <- prometheus.MustNewConstMetric(descEpoch, prometheus.GaugeValue, float64(st.Epoch))
	ch <- prometheus.MustNewConstMetric(descUnacked, prometheus.GaugeValue, float64(len(st.Events)))
	ch <- prometheus.MustNewConstMetric(descDropped, prometheus.CounterValue, float64(st.EventsDropped))
	ch <- prometheus.MustNewConstMetric(descInfo, prometheus.GaugeValue, 1, cmp.Or(st.CgroupMode.Label(), "unknown"), st.Incarnation)
}

// taskLog is the agent's logger for records about one task, by its key
// (user/job/index): they carry user, job and task (the index) attributes.
func (a *Agent) taskLog(key string) *slog.Logger {
	user, rest, _ := strings.Cut(key, "/")
	job, index, _ := strings.Cut(rest, "/")
	return a.log.With("user", user, "job", job, "task", index)
}

// logEvent writes an emitted event to the log: ends and failures at Info,
// starts and adoptions at Debug (a task crash-looping is counted by the
// events, not spelled out twice).
func (a *Agent) logEvent(t *task, ev *agentpb.AgentEvent) {
	level := slog.LevelInfo
	switch ev.Kind {
	case agentpb.EventKind_EVENT_KIND_STARTED, agentpb.EventKind_EVENT_KIND_ADOPTED:
		level = slog.LevelDebug
	}
	if !a.log.Enabled(context.Background(), level) {
		return
	}
	a.taskLog(t.key).Log(context.Background(), level, "task "+eventKindName(ev.Kind),
		"seq", ev.Seq, "pid", ev.Pid, "exit_code", ev.ExitCode, "signal", ev.Signal, "restarts", ev.Restarts,
		"will_restart", ev.WillRestart, "reason", ev.Reason, "message", ev.Message)
}
