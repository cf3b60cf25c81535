package fauxmaster

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is a replay's answer: the window, the change, the recorded and
// simulated metrics side by side, and how the placements compare.
type Report struct {
	From       int64          `json:"from_position"`
	To         int64          `json:"to_position"`
	StartTime  time.Time      `json:"start_time"`
	EndTime    time.Time      `json:"end_time"`
	Events     int            `json:"events"`
	Change     string         `json:"change"`
	Recorded   *Metrics       `json:"recorded"`
	Simulated  *Metrics       `json:"simulated"`
	Placements Placement      `json:"placements"`
	Commands   int            `json:"commands"`
	Passes     int            `json:"passes"`
	Refused    map[string]int `json:"refused,omitempty"`
	// RefusedWhy says why: each command's most frequent reasons.
	RefusedWhy  []Refusal      `json:"refused_why,omitempty"`
	NotReplayed map[string]int `json:"not_replayed,omitempty"`
	// SimSeconds per WallSeconds is the replay's speed.
	SimSeconds  float64 `json:"simulated_seconds"`
	WallSeconds float64 `json:"wall_seconds"`
}

// Placement compares the placements of the window's runs: a task's n-th
// run in the recording against its n-th run in the simulation.
type Placement struct {
	Recorded    int          `json:"recorded"`
	Same        int          `json:"same_machine"`
	Differences []Difference `json:"differences"`
}

// RefusedText lists the requests the simulated cell refused, by command.
func (r *Report) RefusedText() string { return counts(r.Refused) }

// SameShare is the share of recorded placements the simulation put on the
// same machine.
func (p Placement) SameShare() float64 {
	if p.Recorded == 0 {
		return 1
	}
	return float64(p.Same) / float64(p.Recorded)
}

// Difference is one run placed otherwise, and why.
type Difference struct {
	Task      string    `json:"task"`
	Run       int       `json:"run"`
	Recorded  string    `json:"recorded_machine"` // "" when the recording has no such run
	Simulated string    `json:"simulated_machine"`
	At        time.Time `json:"recorded_at"`
	Why       string    `json:"why"`
}

func (s *Sim) report() *Report {
	rec := s.rec
	r := &Report{From: rec.From, To: rec.To, StartTime: rec.StartTime, EndTime: rec.EndTime, Events: rec.Events,
		Change: s.opt.Change.String(), Recorded: rec.Recorded, Simulated: s.obs.finish(s.nowUS), Commands: s.commands, Passes: s.passes,
		Refused: s.refused, RefusedWhy: refusals(s.refusedWhy), NotReplayed: rec.NotReplayed, SimSeconds: rec.EndTime.Sub(rec.StartTime).Seconds()}
	r.Placements = s.compare()
	return r
}

type runKey struct {
	task taskID
	run  int
}

// compare matches runs and says, for each that differs, the likeliest
// cause: a machine the change removed, a pass the recording does not have,
// or a pass that saw a cell which had already diverged (the first
// difference before it is named).
func (s *Sim) compare() Placement {
	sim := make(map[runKey]placement, len(s.placed))
	for _, p := range s.placed {
		sim[runKey{p.task, p.run}] = p
	}
	var out Placement
	var first *Difference
	for _, p := range s.rec.placements {
		out.Recorded++
		sp, ok := sim[runKey{p.task, p.run}]
		delete(sim, runKey{p.task, p.run})
		if ok && sp.machine == p.machine {
			out.Same++
			continue
		}
		d := Difference{Task: taskName(p.task), Run: p.run, Recorded: p.machine, At: time.UnixMicro(p.atUS).UTC()}
		switch {
		case !ok && s.removed[p.machine]:
			d.Why = "not placed in the simulation by the window's end; its machine was removed by the change"
		case !ok:
			d.Why = "not placed in the simulation by the window's end"
		case s.removed[p.machine]:
			d.Simulated, d.Why = sp.machine, "its machine was removed by the change"
		case sp.seed == 0:
			d.Simulated, d.Why = sp.machine, fmt.Sprintf("placed at %s by a pass the recording does not have", fmtTime(sp.atUS))
		case sp.seed != p.seed:
			d.Simulated, d.Why = sp.machine, fmt.Sprintf("placed by another pass (seed %d at %s; recorded: seed %d)", sp.seed, fmtTime(sp.atUS), p.seed)
		default:
			d.Simulated, d.Why = sp.machine, fmt.Sprintf("the pass seeded %d saw another cell", p.seed)
		}
		if (!ok || sp.seed != 0) && !s.removed[p.machine] {
			if first != nil {
				d.Why += fmt.Sprintf("; the cells diverged first at %s run %d", first.Task, first.Run)
			} else if !s.opt.Change.IsZero() {
				d.Why += "; the change (" + s.opt.Change.String() + ")"
			}
		}
		out.Differences = append(out.Differences, d)
		if first == nil {
			first = &out.Differences[len(out.Differences)-1]
		}
	}
	extra := slices.SortedFunc(maps.Values(sim), func(a, b placement) int {
		return cmp.Or(cmp.Compare(a.atUS, b.atUS), cmp.Compare(taskName(a.task), taskName(b.task)), cmp.Compare(a.run, b.run))
	})
	for _, p := range extra {
		if s.rec.initial[p.task] && p.run == 0 {
			continue
		}
		out.Differences = append(out.Differences, Difference{Task: taskName(p.task), Run: p.run, Simulated: p.machine,
			Why: "a run the recording does not have: an earlier run of the task ended otherwise"})
	}
	return out
}

func taskName(k taskID) string {
	if k.inc > 1 {
		return fmt.Sprintf("%s/%s/%d (submission %d)", k.User, k.Job, k.Index, k.inc)
	}
	return fmt.Sprintf("%s/%s/%d", k.User, k.Job, k.Index)
}

func fmtTime(us int64) string { return time.UnixMicro(us).UTC().Format("2006-01-02T15:04:05.000Z") }

// WriteText writes the report for a terminal: at most maxDiffs of the
// differences.
func (r *Report) WriteText(w io.Writer, maxDiffs int) error {
	p := &errWriter{w: w}
	p.printf("window   %s to %s (positions %d-%d, %d events)\n", r.StartTime.Format(time.RFC3339), r.EndTime.Format(time.RFC3339), r.From+1, r.To, r.Events)
	p.printf("change   %s\n", r.Change)
	p.printf("replayed %s of cell time in %.2f s (%.0f simulated s per s): %d commands, %d passes\n\n",
		time.Duration(r.SimSeconds*float64(time.Second)).Round(time.Second), r.WallSeconds, r.SimSeconds/max(r.WallSeconds, 1e-9), r.Commands, r.Passes)
	tw := tabwriter.NewWriter(p, 2, 8, 2, ' ', 0)
	fmt.Fprintf(tw, "\trecorded\tsimulated\n")
	row := func(name string, f func(*Metrics) string) {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", name, f(r.Recorded), f(r.Simulated))
	}
	row("pending p50/p90/p99 (s)", func(m *Metrics) string { return pcts(m.Pending) })
	row("tasks placed", func(m *Metrics) string { return fmt.Sprint(m.Placed) })
	row("pending at the end", func(m *Metrics) string { return fmt.Sprint(m.Never) })
	row("evictions (preemptions)", func(m *Metrics) string { return fmt.Sprintf("%d (%d)", m.Evicted, m.Preempts) })
	row("tasks lost", func(m *Metrics) string { return fmt.Sprint(m.Lost) })
	row("CPU held / capacity", func(m *Metrics) string { return fmt.Sprintf("%.1f%%", 100*m.CPU) })
	row("memory held / capacity", func(m *Metrics) string { return fmt.Sprintf("%.1f%%", 100*m.Memory) })
	row("machines used", func(m *Metrics) string { return fmt.Sprint(m.MachinesUsed) })
	tw.Flush()
	p.printf("\nper user and band: pending p50/p90/p99 in s, placed, pending at the end, evictions (preemptions)\n")
	tw = tabwriter.NewWriter(p, 2, 8, 2, ' ', 0)
	fmt.Fprintf(tw, "USER\tBAND\tRECORDED\t\t\t\tSIMULATED\n")
	sim := map[[2]string]*Group{}
	for _, g := range r.Simulated.Groups {
		sim[[2]string{g.User, g.Band}] = g
	}
	seen := map[[2]string]bool{}
	line := func(k [2]string, a, b *Group) {
		cells := func(g *Group) string {
			if g == nil {
				return "-\t-\t-\t-"
			}
			return fmt.Sprintf("%s\t%d\t%d\t%d (%d)", pcts(g.Pending), g.Placed, g.Never, g.Evicted, g.Preempts)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", k[0], k[1], cells(a), cells(b))
	}
	for _, g := range r.Recorded.Groups {
		k := [2]string{g.User, g.Band}
		seen[k] = true
		line(k, g, sim[k])
	}
	for _, g := range r.Simulated.Groups {
		if k := [2]string{g.User, g.Band}; !seen[k] {
			line(k, nil, g)
		}
	}
	tw.Flush()
	pl := r.Placements
	p.printf("\nplacements: %d of %d recorded runs on the same machine (%.1f%%), %d differences\n", pl.Same, pl.Recorded, 100*pl.SameShare(), len(pl.Differences))
	for i, d := range pl.Differences {
		if i == maxDiffs {
			p.printf("  ... %d more (--json lists them all)\n", len(pl.Differences)-maxDiffs)
			break
		}
		p.printf("  %s run %d: recorded %s, simulated %s: %s\n", d.Task, d.Run, orNone(d.Recorded), orNone(d.Simulated), d.Why)
	}
	if len(r.Refused) > 0 {
		p.printf("\nrequests the simulated cell refused: %s\n", counts(r.Refused))
		for _, w := range r.RefusedWhy {
			p.printf("  %s\n", w)
		}
	}
	if len(r.NotReplayed) > 0 {
		p.printf("recorded requests not replayed (not modelled): %s\n", counts(r.NotReplayed))
	}
	return p.err
}

func pcts(d Distribution) string {
	if d.Count == 0 {
		return "-"
	}
	return fmt.Sprintf("%s/%s/%s", secs(d.P50), secs(d.P90), secs(d.P99))
}

func secs(v float64) string {
	switch {
	case v < 10:
		return fmt.Sprintf("%.2f", v)
	case v < 1000:
		return fmt.Sprintf("%.0f", v)
	}
	return time.Duration(v * float64(time.Second)).Round(time.Second).String()
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func counts(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(b []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(b)
	e.err = err
	return n, err
}

func (e *errWriter) printf(format string, args ...any) { fmt.Fprintf(e, format, args...) }
