package webui

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/fauxmaster"
	"github.com/corralhq/corral/projections"
)

// The what-if page replays a window of the cell's log through the cell's
// own code with a change (fauxmaster, as `corral sim`), and draws the
// recorded and simulated pending times side by side. The replay runs
// where Config.Replay runs it: in the binary, a child process bounded in
// time and memory and stopped when the viewer leaves, never the master.

// ReplayRequest is one what-if replay: a window of the log (positions)
// and a change in corral sim's words, asked by User.
type ReplayRequest struct {
	User     string
	From, To int64
	Change   fauxmaster.ChangeArgs
}

// SimDifferences is how many differing placements the page lists (a
// replay's report need keep no more).
const SimDifferences = 100

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
	// add may come once with shapes apart, or once per shape.
	d := simData{From: q.Get("from"), To: q.Get("to"), Remove: q.Get("remove"), Add: strings.Join(q["add"], " "), Policy: q.Get("policy")}
	if h.cfg.Log == nil || h.cfg.Replay == nil {
		h.fail(w, r, http.StatusNotFound, fmt.Errorf("this web UI was started without the cell's log or a way to replay it: run corral sim"))
		return
	}
	if !q.Has("run") {
		h.render(w, r, "sim", page{Title: "What if", Nav: "cell", Data: d})
		return
	}
	args := fauxmaster.ChangeArgs{Remove: d.Remove, Add: strings.Fields(d.Add), Policy: d.Policy}
	if _, err := fauxmaster.ParseChange(args); err != nil {
		var ce *fauxmaster.ChangeError
		if errors.As(err, &ce) {
			h.fail(w, r, http.StatusBadRequest, &badParam{ce.Field, strings.TrimPrefix(err.Error(), ce.Field+": ")})
			return
		}
		h.fail(w, r, http.StatusBadRequest, err)
		return
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
	if from >= to {
		field := "from"
		if to == 0 {
			field = "to" // before the log's first event
		}
		h.fail(w, r, http.StatusBadRequest, &badParam{field, fmt.Sprintf("the window from %d to %d holds no event", from, to)})
		return
	}
	rep, err := h.cfg.Replay(ctx, ReplayRequest{User: h.viewerName(r), From: from, To: to, Change: args})
	if err != nil {
		h.failAPI(w, r, err)
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
	rep.Placements.KeepDifferences(SimDifferences)
	d.Diffs, d.MoreDiffs = rep.Placements.Differences, rep.Placements.MoreDifferences
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
