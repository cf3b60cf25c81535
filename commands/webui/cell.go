package webui

import (
	"cmp"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/corralhq/corral/commands/api"
	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/commands/master"
	"github.com/corralhq/corral/projections"
)

// rateWindow is how many of the latest events the cell page's event rate
// is measured over.
const rateWindow = 2000

type cellData struct {
	Position, TimeUS             int64
	Leader                       string
	Up, Down, Draining, Machines int
	Jobs, Pending, Live          int
	Capacity                     projections.Resources // of the machines that are up
	CPUChart, MemoryChart        template.HTML
	Rate                         template.HTML
	RatePerSecond                string
	RateErr                      string
	MachineRows                  []*apipb.MachineView
	Pager                        pager
	BandRows                     []bandRow
	// Troubled are the tasks to look at first: crash-looping or failing
	// their health check (the first ten), of TroubledCount.
	Troubled      []troubledTask
	TroubledCount int
	DiffForm      diffData // the empty form of the diff page
	// LossHeld is set while the leader's link holds machine loss.
	LossHeld *master.LossHold
}

type troubledTask struct {
	Key  projections.TaskKey
	What string
}

// bandRow is what the live work of one priority band holds and uses.
type bandRow struct {
	Band            string
	Tasks           int
	Limit, Reserved projections.Resources
	CPUUsed         float64
	MemoryUsed      int64
}

func (h *Handler) cell(w http.ResponseWriter, r *http.Request) {
	offset, err := intParam(r, "offset", 0)
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err)
		return
	}
	d := cellData{DiffForm: diffData{IDPrefix: "c"}}
	if h.cfg.LossHold != nil {
		if hold, ok := h.cfg.LossHold(); ok {
			d.LossHeld = &hold
		}
	}
	var sums bandSums
	h.cfg.Cell.View(func(st *projections.State) {
		d.Position, d.TimeUS, d.Leader = st.Position, st.TimeUS, st.Leader
		ms := st.SortedMachines()
		d.Machines = len(ms)
		d.countMachines(ms)
		for i := offset; i < len(ms) && i < offset+h.cfg.PageSize; i++ {
			d.MachineRows = append(d.MachineRows, api.MachineView(ms[i]))
		}
		d.Pager = newPager(r, "offset", offset, h.cfg.PageSize, len(ms))
		d.Jobs, d.Pending = len(st.Jobs), st.PendingCount()
		nowUS := time.Now().UnixMicro()
		troubled := d.sumTasks(st, &sums, nowUS)
		d.troubled(troubled, nowUS)
	})
	d.bandCharts(sums)
	if d.Position > 0 {
		h.eventRate(r, &d)
	}
	h.render(w, r, "cell", page{Title: "Cell", Nav: "cell", Data: d})
}

// bandSums is the live work of each priority band.
type bandSums [len(projectionsBands)]bandRow

// countMachines counts machines by state and the capacity of those not down.
func (d *cellData) countMachines(ms []*projections.Machine) {
	for _, m := range ms {
		switch {
		case m.State == projections.MachineDown:
			d.Down++
		case m.Draining:
			d.Draining++
			d.Capacity = d.Capacity.Add(m.Capacity)
		default:
			d.Up++
			d.Capacity = d.Capacity.Add(m.Capacity)
		}
	}
}

// sumTasks counts live tasks and sums their limits, reservations and usage
// (and placed allocs') into their bands; it returns the tasks that crash-loop
// or fail their health checks.
func (d *cellData) sumTasks(st *projections.State, sums *bandSums, nowUS int64) []*projections.Task {
	var troubled []*projections.Task
	for _, j := range st.Jobs {
		d.Live += j.LiveTasks()
		if j.Dead() {
			continue
		}
		for _, t := range j.Tasks {
			if t == nil || t.State == projections.TaskDead {
				continue
			}
			if t.CrashLooping(nowUS) || t.Health == projections.HealthUnhealthy {
				troubled = append(troubled, t)
			}
			if !t.Live() {
				continue
			}
			s := &sums[projections.BandOf(t.Priority())]
			s.Tasks++
			if t.AllocIndex < 0 {
				// Tasks inside an alloc are counted through it.
				s.Limit = s.Limit.Add(t.Limit)
				s.Reserved = s.Reserved.Add(t.Reservation)
			}
			s.CPUUsed += coresUsed(t.Usage)
			s.MemoryUsed += t.Usage.MemoryBytes
		}
	}
	for _, as := range st.AllocSets {
		s := &sums[projections.BandOf(as.Priority)]
		for _, a := range as.Allocs {
			if a != nil && a.Placed() {
				s.Limit = s.Limit.Add(as.Resources)
				s.Reserved = s.Reserved.Add(as.Resources)
			}
		}
	}
	return troubled
}

// troubled words the first ten troubled tasks by key; the rest are counted.
func (d *cellData) troubled(troubled []*projections.Task, nowUS int64) {
	d.TroubledCount = len(troubled)
	slices.SortFunc(troubled, func(a, b *projections.Task) int {
		x, y := a.Key(), b.Key()
		return cmp.Or(cmp.Compare(x.User, y.User), cmp.Compare(x.Job, y.Job), cmp.Compare(x.Index, y.Index))
	})
	for _, t := range troubled[:min(len(troubled), 10)] {
		what := t.Status(nowUS)
		if t.CrashLooping(nowUS) {
			what = fmt.Sprintf("crash-looping (%d restarts): %s", t.Restarts, what)
		}
		d.Troubled = append(d.Troubled, troubledTask{Key: t.Key(), What: what})
	}
}

// bandCharts fills the band rows and charts, highest band first, as people
// read priority.
func (d *cellData) bandCharts(sums bandSums) {
	var cpuGroups, memGroups []barGroup
	for i := len(projectionsBands) - 1; i >= 0; i-- {
		s := sums[i]
		s.Band = projectionsBands[i].String()
		d.BandRows = append(d.BandRows, s)
		cpuGroups = append(cpuGroups, barGroup{Label: s.Band, Bars: []bar{
			{"limit", "limit", float64(s.Limit.CPUMilli) / 1000},
			{"reservation", "reservation", float64(s.Reserved.CPUMilli) / 1000},
			{"usage", "usage", s.CPUUsed},
		}})
		memGroups = append(memGroups, barGroup{Label: s.Band, Bars: []bar{
			{"limit", "limit", float64(s.Limit.MemoryBytes)},
			{"reservation", "reservation", float64(s.Reserved.MemoryBytes)},
			{"usage", "usage", float64(s.MemoryUsed)},
		}})
	}
	d.CPUChart = barChart{ID: "cpu", RowName: "band", Title: "CPU by priority band (cores): limit, reservation and usage of live work", Unit: cores,
		Capacity: float64(d.Capacity.CPUMilli) / 1000, Groups: cpuGroups}.HTML()
	d.MemoryChart = barChart{ID: "memory", RowName: "band", Title: "Memory by priority band: limit, reservation and usage of live work",
		Unit: func(v float64) string { return humanBytes(int64(v)) }, Capacity: float64(d.Capacity.MemoryBytes), Groups: memGroups}.HTML()

}

// eventRate charts the event rate over the latest events of the log.
func (h *Handler) eventRate(r *http.Request, d *cellData) {
	evs, err := h.cfg.API.Events(h.ctx(r), &apipb.EventsRequest{FromPosition: max(1, d.Position-rateWindow+1), Limit: rateWindow})
	if err != nil {
		d.RateErr = "The event rate is unavailable: " + err.Error()
	} else if n := len(evs.Events); n > 0 {
		from, to := evs.Events[0].OccurredAtUs, evs.Events[n-1].OccurredAtUs
		if to <= from {
			to = from + 1
		}
		const buckets = 30
		counts := make([]int, buckets)
		for _, e := range evs.Events {
			i := int(float64(e.OccurredAtUs-from) / float64(to-from) * buckets)
			counts[min(max(i, 0), buckets-1)]++
		}
		secs := float64(to-from) / 1e6
		d.RatePerSecond = strconv.FormatFloat(float64(n)/max(secs, 1e-6), 'f', 1, 64)
		d.Rate = columnChart{ID: "rate", Title: "Events of the log over time (the latest " + num(n) + ")", From: from, To: to, Counts: counts}.HTML()
	}
}

var projectionsBands = [4]projections.Band{projections.BestEffort, projections.Batch, projections.Production, projections.Monitoring}
