package infrastore

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"github.com/corralhq/corral/events"
)

// CostsRequest asks for the showback of [From, To): what the web UI's
// costs page draws.
type CostsRequest struct {
	From, To time.Time // whole hours, UTC
	Cell     string
	Label    string // the label whose values are the teams; default "team"
	Top      int    // jobs; default 10, at most 100
	// User, when set, is whose costs to show (commands.CostsScope): their
	// jobs' rows only, with the cell's idle capacity, which names no one,
	// drawn apart and left out of Total.
	User string
}

// CostSeries is one user's, team's or band's spend per bucket.
type CostSeries struct {
	Name  string
	Costs []float64 // per bucket, for drawing; the total is exact
	Total Decimal
}

// JobCost is one job's spend over the period.
type JobCost struct {
	User, Job, Team string
	Total           Decimal
}

// Costs is a period's showback. Every figure comes from the rows of the
// FOCUS export of the period (per job, idle capacity apart): the costs
// page and the bill cannot disagree.
type Costs struct {
	Currency string
	Label    string
	Step     time.Duration // an hour, or a day for periods over two days
	Buckets  []time.Time
	// Users, Teams and Bands are by total, the largest first; past
	// maxSeries the rest are summed as "(others)". A team "" is the jobs
	// without the label.
	Users, Teams, Bands []CostSeries
	Idle                CostSeries
	// Corrections is the late usage of closed months billed in the
	// period (not drawn: it belongs to earlier hours).
	Corrections Decimal
	Total       Decimal // usage, corrections and idle capacity: the invoices' sum; with User, theirs alone
	TopJobs     []JobCost
	User        string // whose costs: "" every user's
}

// maxSeries is the most series a chart draws before "(others)".
const maxSeries = 12

func (r *CostsRequest) validate() error {
	f := FocusRequest{From: r.From, To: r.To}
	if err := f.validate(); err != nil {
		return err
	}
	switch {
	case r.Label == "":
		r.Label = "team"
	case !events.ValidLabelKey(r.Label):
		return fmt.Errorf("%w: label: %q is not a label key", ErrInvalid, r.Label)
	}
	switch {
	case r.Top == 0:
		r.Top = 10
	case r.Top < 0 || r.Top > 100:
		return fmt.Errorf("%w: top: %d is not 1-100", ErrInvalid, r.Top)
	}
	return nil
}

// Costs computes the showback of a period in one read-only transaction.
func (s *Infrastore) Costs(ctx context.Context, req CostsRequest) (*Costs, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	if err := req.validate(); err != nil {
		return nil, err
	}
	step := time.Hour
	if req.To.Sub(req.From) > 48*time.Hour {
		step = 24 * time.Hour
	}
	out := &Costs{Label: req.Label, Step: step, User: req.User}
	for t := req.From; t.Before(req.To); t = t.Add(step) {
		out.Buckets = append(out.Buckets, t.UTC())
	}
	focus := FocusRequest{From: req.From, To: req.To, Cell: req.Cell, Granularity: "job", Idle: IdleSeparate, User: req.User}
	if err := focus.validate(); err != nil {
		return nil, err
	}
	var err error
	if focus.Cell, err = s.billingCell(ctx, focus.Cell); err != nil {
		return nil, err
	}
	err = s.inReadOnly(ctx, func(conn *sql.Conn) error { return readCosts(ctx, conn, &focus, &req, out) })
	if err != nil {
		return nil, fmt.Errorf("infrastore: costs: %w", err)
	}
	return out, nil
}

// costsSQL sums the FOCUS rows' costs per series and bucket: the period's
// start, the bucket's length and the JSON path of the team label.
const costsSQL = `,
costed AS (
	SELECT (hour - %[1]d) // %[2]d AS bucket, user, job, band, json_extract_string(tags, %[3]s) AS team,
		resource_type = 'Idle capacity' AS idle, charge_class IS NOT NULL AS correction, currency,
		coalesce(cpu_q * cpu_p, 0) + coalesce(memory_q * memory_p, 0) + coalesce(disk_q * disk_p, 0) + coalesce(gpu_q * gpu_p, 0) AS cost
	FROM rows
)
SELECT 'user', bucket, user, NULL, sum(cost)::VARCHAR FROM costed WHERE NOT idle AND NOT correction GROUP BY bucket, user
UNION ALL SELECT 'team', bucket, coalesce(team, ''), NULL, sum(cost)::VARCHAR FROM costed WHERE NOT idle AND NOT correction GROUP BY bucket, team
UNION ALL SELECT 'band', bucket, band, NULL, sum(cost)::VARCHAR FROM costed WHERE NOT idle AND NOT correction GROUP BY bucket, band
UNION ALL SELECT 'idle', bucket, '', NULL, sum(cost)::VARCHAR FROM costed WHERE idle GROUP BY bucket
UNION ALL SELECT 'correction', 0, '', NULL, sum(cost)::VARCHAR FROM costed WHERE correction HAVING count(*) > 0
UNION ALL SELECT 'job', 0, user, job || '|' || coalesce(any_value(team), ''), sum(cost)::VARCHAR FROM costed WHERE NOT idle GROUP BY user, job
UNION ALL SELECT 'currency', 0, min(currency), NULL, NULL FROM costed`

// readCosts fills in out from the FOCUS rows of focus.
func readCosts(ctx context.Context, conn *sql.Conn, focus *FocusRequest, req *CostsRequest, out *Costs) error {
	in, err := readFocusInputs(ctx, conn, focus)
	if err != nil {
		return err
	}
	rows, err := conn.QueryContext(ctx, focusRows(focus, &in, whole(focus), false)+fmt.Sprintf(costsSQL,
		req.From.UnixMicro(), out.Step.Microseconds(), sqlString(`$."`+req.Label+`"`)))
	if err != nil {
		return err
	}
	defer rows.Close()
	series := map[string]map[string]*CostSeries{"user": {}, "team": {}, "band": {}}
	out.Idle = CostSeries{Name: "idle", Costs: make([]float64, len(out.Buckets))}
	for rows.Next() {
		var kind string
		var bucket int
		var name, extra, total sql.NullString
		if err := rows.Scan(&kind, &bucket, &name, &extra, &total); err != nil {
			return err
		}
		var cost Decimal
		if total.Valid {
			if cost, err = ParseDecimal(total.String, 18); err != nil {
				return err
			}
		}
		out.add(series, req, kind, bucket, name.String, extra.String, cost)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if out.Currency == "" {
		// Nothing charged: the currency of the sheet in force at the start.
		err := conn.QueryRowContext(ctx, `SELECT coalesce((SELECT currency FROM price_sheets WHERE effective_time <= ?
			ORDER BY effective_time DESC, position DESC LIMIT 1), 'USD')`, req.From.UnixMicro()).Scan(&out.Currency)
		if err != nil {
			return err
		}
	}
	out.Users, out.Teams, out.Bands = bySize(series["user"], len(out.Buckets)), bySize(series["team"], len(out.Buckets)), bySize(series["band"], len(out.Buckets))
	out.TopJobs = topJobs(out.TopJobs, req.Top)
	return nil
}

// add counts one row of costsSQL into out and its series.
func (out *Costs) add(series map[string]map[string]*CostSeries, req *CostsRequest, kind string, bucket int, name, extra string, cost Decimal) {
	switch kind {
	case "currency":
		out.Currency = name
		return
	case "correction":
		out.Corrections = out.Corrections.Add(cost)
	case "job":
		job, team, _ := cutLast(extra, "|")
		out.TopJobs = append(out.TopJobs, JobCost{User: name, Job: job, Team: team, Total: cost})
		if len(out.TopJobs) > 4*req.Top {
			out.TopJobs = topJobs(out.TopJobs, req.Top)
		}
		return
	case "idle":
		addTo(&out.Idle, bucket, cost)
		if req.User != "" {
			return // the cell's, not the user's to pay
		}
	default:
		cs := series[kind][name]
		if cs == nil {
			cs = &CostSeries{Name: name, Costs: make([]float64, len(out.Buckets))}
			series[kind][name] = cs
		}
		addTo(cs, bucket, cost)
		if kind != "user" {
			return // the users' series already count it
		}
	}
	out.Total = out.Total.Add(cost)
}

func addTo(cs *CostSeries, bucket int, cost Decimal) {
	if bucket >= 0 && bucket < len(cs.Costs) {
		cs.Costs[bucket] += cost.Float64()
	}
	cs.Total = cs.Total.Add(cost)
}

// bySize orders series by total, the largest first (then by name), and
// sums those past maxSeries as "(others)".
func bySize(m map[string]*CostSeries, buckets int) []CostSeries {
	all := make([]CostSeries, 0, len(m))
	for _, cs := range m {
		all = append(all, *cs)
	}
	slices.SortFunc(all, func(a, b CostSeries) int {
		return cmp.Or(b.Total.Cmp(a.Total), cmp.Compare(a.Name, b.Name))
	})
	if len(all) <= maxSeries {
		return all
	}
	others := CostSeries{Name: "(others)", Costs: make([]float64, buckets)}
	for _, cs := range all[maxSeries-1:] {
		for i, c := range cs.Costs {
			others.Costs[i] += c
		}
		others.Total = others.Total.Add(cs.Total)
	}
	return append(all[:maxSeries-1], others)
}

// topJobs keeps the n costliest jobs, the costliest first (then by name).
func topJobs(jobs []JobCost, n int) []JobCost {
	slices.SortFunc(jobs, func(a, b JobCost) int {
		return cmp.Or(b.Total.Cmp(a.Total), cmp.Compare(a.User, b.User), cmp.Compare(a.Job, b.Job))
	})
	return jobs[:min(n, len(jobs))]
}
