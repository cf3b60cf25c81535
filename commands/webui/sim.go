package webui

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/fauxmaster"
	"github.com/corralhq/corral/projections"
	"github.com/corralhq/corral/scheduler"
)

// The what-if page replays a window of the cell's log through the cell's
// own code with a change (fauxmaster, as `corral sim`), and draws the
// recorded and simulated pending times side by side. A replay runs in the
// master's process: one at a time, over a bounded window.

// simMaxEvents bounds the window a page may replay (the command line has
// no bound: it runs in its own process).
const simMaxEvents = 100_000

type simData struct {
	From, To, Remove, Add, Policy string // as given, for the form
	Ran                           bool
	Report                        *fauxmaster.Report
	Pending                       barChart
	Rows                          []simRow
	Diffs                         []fauxmaster.Difference
	MoreDiffs                     int
}

type simRow struct {
	User, Band string
	Rec, Sim   *fauxmaster.Group
}

func (h *Handler) sim(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	d := simData{From: q.Get("from"), To: q.Get("to"), Remove: q.Get("remove"), Add: q.Get("add"), Policy: q.Get("policy")}
	if h.cfg.Log == nil {
		h.fail(w, r, http.StatusNotFound, fmt.Errorf("this web UI was started without the cell's log: run corral sim"))
		return
	}
	if !q.Has("run") {
		h.render(w, r, "sim", page{Title: "What if", Nav: "cell", Data: d})
		return
	}
	var change fauxmaster.Change
	var err error
	if d.Remove != "" {
		if change.RemovePercent, err = fauxmaster.ParseRemove(d.Remove); err != nil {
			h.fail(w, r, http.StatusBadRequest, &badParam{"remove", err.Error()})
			return
		}
	}
	for _, a := range strings.Fields(d.Add) {
		g, err := fauxmaster.ParseMachines(a)
		if err != nil {
			h.fail(w, r, http.StatusBadRequest, &badParam{"add", err.Error()})
			return
		}
		change.Add = append(change.Add, g)
	}
	if len(change.Add) > 4 {
		h.fail(w, r, http.StatusBadRequest, &badParam{"add", "at most 4 machine shapes"})
		return
	}
	if d.Policy != "" {
		if change.Policy, err = scheduler.ParsePolicy(d.Policy); err != nil {
			h.fail(w, r, http.StatusBadRequest, &badParam{"policy", err.Error()})
			return
		}
	}
	ctx := r.Context()
	head, err := h.cfg.Log.Head(ctx)
	if err != nil {
		h.fail(w, r, http.StatusServiceUnavailable, err)
		return
	}
	from, err := h.logPoint(r, "from", 0)
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err)
		return
	}
	to, err := h.logPoint(r, "to", head)
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err)
		return
	}
	to = min(to, head)
	if to-from > simMaxEvents {
		h.fail(w, r, http.StatusBadRequest, &badParam{"from", fmt.Sprintf("the window holds %d events; this page replays at most %d (corral sim has no bound)", to-from, simMaxEvents)})
		return
	}
	select {
	case h.replaying <- struct{}{}:
		defer func() { <-h.replaying }()
	default:
		h.fail(w, r, http.StatusTooManyRequests, fmt.Errorf("another replay is running; try again when it is done"))
		return
	}
	rec, err := fauxmaster.Load(ctx, h.cfg.Log, from, to)
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, &badParam{"from", err.Error()})
		return
	}
	rep, err := fauxmaster.Run(rec, fauxmaster.Options{Change: change, Seed: 1})
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err)
		return
	}
	d.Ran, d.Report = true, rep
	d.Pending = pendingChart(rep)
	sim := map[[2]string]*fauxmaster.Group{}
	for _, g := range rep.Simulated.Groups {
		sim[[2]string{g.User, g.Band}] = g
	}
	for _, g := range rep.Recorded.Groups {
		k := [2]string{g.User, g.Band}
		d.Rows = append(d.Rows, simRow{User: g.User, Band: g.Band, Rec: g, Sim: sim[k]})
		delete(sim, k)
	}
	for _, g := range rep.Simulated.Groups {
		if sim[[2]string{g.User, g.Band}] != nil {
			d.Rows = append(d.Rows, simRow{User: g.User, Band: g.Band, Sim: g})
		}
	}
	d.Diffs = rep.Placements.Differences
	if len(d.Diffs) > 100 {
		d.Diffs, d.MoreDiffs = d.Diffs[:100], len(d.Diffs)-100
	}
	h.render(w, r, "sim", page{Title: "What if", Nav: "cell", Data: d})
}

// logPoint reads a window end as a log position: a position, or a time
// (pointParam's forms) resolved to the last event at or before it.
func (h *Handler) logPoint(r *http.Request, name string, def int64) (int64, error) {
	if strings.TrimSpace(r.URL.Query().Get(name)) == "" {
		return def, nil
	}
	pos, us, err := pointParam(r, name, time.Time{})
	if err != nil || pos > 0 {
		return pos, err
	}
	// The past only, as corral sim and every other moment of the log.
	if err := commands.CheckPastMoment(name, time.UnixMicro(us), time.Now()); err != nil {
		return 0, &badParam{name, strings.TrimPrefix(err.Error(), name+": ")}
	}
	return projections.PositionAt(r.Context(), h.cfg.Log, time.UnixMicro(us))
}

// pendingChart draws the two distributions of pending time by bucket.
func pendingChart(rep *fauxmaster.Report) barChart {
	c := barChart{ID: "pending", RowName: "waited", Title: "Tasks by time pending, recorded and simulated",
		Unit: func(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) + " tasks" }}
	rh, sh := rep.Recorded.Pending.Histogram, rep.Simulated.Pending.Histogram
	last := 0
	for i := range max(len(rh), len(sh)) {
		if at(rh, i)+at(sh, i) > 0 {
			last = i
		}
	}
	for i := 0; i <= last; i++ {
		label := fmt.Sprintf("under %s", time.Duration(1<<i)*time.Second)
		if i == len(rh)-1 {
			label = fmt.Sprintf("%s or more", time.Duration(1<<(i-1))*time.Second)
		}
		c.Groups = append(c.Groups, barGroup{Label: label, Bars: []bar{
			{Name: "recorded", Class: "limit", Value: float64(at(rh, i))},
			{Name: "simulated", Class: "usage", Value: float64(at(sh, i))},
		}})
	}
	return c
}

func at(xs []int, i int) int {
	if i < len(xs) {
		return xs[i]
	}
	return 0
}
