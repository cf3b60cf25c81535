package webui

import (
	"context"
	"fmt"
	"html/template"
	"math/big"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// The costs page is showback: what each user, team and band spent over a
// month, what nobody used, and the costliest jobs, with the month's FOCUS
// file to download. Its figures are the Infrastore's (API Costs), priced
// as the bill is: the page and the bill cannot disagree. The API answers
// the viewer's own costs unless they are an admin (commands.CostsScope):
// a user's page draws their jobs by team and band, with the cell's idle
// capacity apart from their total, and their FOCUS rows only.

type costsData struct {
	Month, Prev, Next string // YYYY-MM
	Label             string
	Owner             string // whose costs: "" every user's (an admin's view)
	Currency          string
	Total, Usage      string
	Idle, IdleShare   string
	Corrections       string
	HasCorrections    bool
	ByUser            template.HTML
	ByTeam            template.HTML
	ByBand            template.HTML
	TopJobs           []jobCostRow
	CSRF              string
	Err               string
	NoStore           bool
	Empty             bool
}

type jobCostRow struct{ User, Job, Team, Total, Href string }

// monthParam reads ?month=YYYY-MM; missing is the month of now.
func monthParam(r *http.Request, name string, now time.Time) (time.Time, error) {
	v := strings.TrimSpace(r.URL.Query().Get(name))
	if r.Method == http.MethodPost {
		v = strings.TrimSpace(r.PostForm.Get(name))
	}
	if v == "" {
		start, _ := projections.BillingPeriodOf(now)
		return start, nil
	}
	t, err := time.Parse("2006-01", v)
	if err != nil || t.Year() < 2000 || t.Year() > 9999 {
		return time.Time{}, &badParam{name, fmt.Sprintf("%q is not a month as YYYY-MM", v)}
	}
	return t, nil
}

// labelParam reads the label whose values are the teams; default team.
func labelParam(v string) (string, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return "team", nil
	}
	if !events.ValidLabelKey(v) {
		return "", &badParam{"label", fmt.Sprintf("%q is not a label key", v)}
	}
	return v, nil
}

func (h *Handler) costs(w http.ResponseWriter, r *http.Request) {
	month, err := monthParam(r, "month", h.cfg.Clock().UTC())
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err)
		return
	}
	label, err := labelParam(r.URL.Query().Get("label"))
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err)
		return
	}
	end := month.AddDate(0, 1, 0)
	d := costsData{Month: month.Format("2006-01"), Prev: month.AddDate(0, -1, 0).Format("2006-01"), Next: end.Format("2006-01"),
		Label: label, CSRF: h.csrfToken(w, r)}
	c, err := h.cfg.API.Costs(h.ctx(r), &apipb.CostsRequest{FromUs: month.UnixMicro(), ToUs: end.UnixMicro(), Label: label})
	if err != nil {
		d.Err = status.Convert(err).Message()
		d.NoStore = status.Code(err) == codes.Unimplemented
		w.WriteHeader(httpStatus(err))
		h.render(w, r, "costs", page{Title: "Costs", Nav: "costs", Data: d})
		return
	}
	d.Owner = c.User
	money := d.totals(c)
	cc := costCharts{c: c, from: month, to: end, label: label}
	step := "day"
	if c.StepUs == time.Hour.Microseconds() {
		step = "hour"
	}
	if d.Owner == "" {
		d.ByUser = cc.chart("by-user", "Spend per "+step+" by user", c.Users, nil)
	}
	d.ByTeam = cc.chart("by-team", "Spend per "+step+" by the label "+label, c.Teams, nil)
	d.ByBand = cc.chart("by-band", "Spend per "+step+" by band, and idle capacity", c.Bands, c.Idle)
	for _, j := range c.TopJobs {
		d.TopJobs = append(d.TopJobs, jobCostRow{User: j.User, Job: j.Job, Team: j.Team, Total: money(j.Total),
			Href: "/jobs/" + url.PathEscape(j.User) + "/" + url.PathEscape(j.Job)})
	}
	h.render(w, r, "costs", page{Title: "Costs", Nav: "costs", Data: d})
}

// totals fills the month's total, its parts and the idle share, and returns
// how to word the top jobs' amounts at the same precision.
func (d *costsData) totals(c *apipb.CostsReply) (money func(string) string) {
	// One precision for the total, its parts and the top jobs, so the
	// figures shown add up (money.go).
	totalR, idleR, corrR := parseMoneyRat(c.Total), parseMoneyRat(c.Idle.GetTotal()), parseMoneyRat(c.Corrections)
	usageR := new(big.Rat).Sub(totalR, corrR)
	if d.Owner == "" {
		usageR.Sub(usageR, idleR) // one user's total holds no idle capacity
	}
	var jobs []*big.Rat
	for _, j := range c.TopJobs {
		jobs = append(jobs, parseMoneyRat(j.Total))
	}
	prec := moneyPrecision(totalR, []*big.Rat{usageR, idleR, corrR}, jobs...)
	money = func(s string) string { return formatMoneyAt(parseMoneyRat(s), prec, c.Currency) }
	d.Currency, d.Total, d.Idle, d.Corrections = c.Currency, money(c.Total), money(c.Idle.GetTotal()), money(c.Corrections)
	d.HasCorrections = corrR.Sign() != 0
	d.Usage = formatMoneyAt(usageR, prec, c.Currency)
	total, idle := parseMoney(c.Total), parseMoney(c.Idle.GetTotal())
	if total > 0 && d.Owner == "" {
		share := 100 * idle / total
		d.IdleShare = strconv.FormatFloat(share, 'f', 1, 64) + "%"
		if share > 0 && share < 0.05 {
			d.IdleShare = strconv.FormatFloat(share, 'g', 2, 64) + "%" // not 0.0% of something
		}
	}
	d.Empty = total == 0
	return money
}

// costTick words an axis tick. Ticks are narrow: the currency is in the
// title, tiny amounts in three significant digits.
func costTick(v float64) string {
	if v == 0 || v >= 0.01 || v <= -0.01 {
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

// costCharts draws a month's costs.
type costCharts struct {
	c        *apipb.CostsReply
	from, to time.Time
	label    string
}

// chart draws groups, and extra as idle capacity when given, as steps over
// the month.
func (cc costCharts) chart(id, title string, groups []*apipb.CostSeries, extra *apipb.CostSeries) template.HTML {
	lc := lineChart{ID: id, Title: title + ", " + cc.c.Currency, Unit: costTick, From: cc.from.UnixMicro(), To: cc.to.UnixMicro()}
	for i, cs := range append(groups, extra) {
		if cs == nil {
			continue
		}
		s := series{Name: cs.Name, Class: fmt.Sprintf("s%d", i%maxChartSeries), Step: true}
		if s.Name == "" {
			s.Name = "(no " + cc.label + " label)"
		}
		if cs == extra {
			s.Class = "idle"
		}
		for j, v := range cs.Costs {
			if j < len(cc.c.BucketUs) {
				s.Points = append(s.Points, point{T: cc.c.BucketUs[j], V: v})
			}
		}
		lc.Series = append(lc.Series, s)
	}
	return lc.HTML()
}

// maxChartSeries is the palette's size (style.css: .s0 to .s11).
const maxChartSeries = 12

// costsExport streams the month's FOCUS file (POST, with the page's CSRF
// token: an export costs the Infrastore).
func (h *Handler) costsExport(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		h.fail(w, r, http.StatusBadRequest, &badParam{"month", "the form does not parse: " + err.Error()})
		return
	}
	if !h.csrfValid(r) {
		h.fail(w, r, http.StatusForbidden, &badParam{"csrf", "the form's token does not match this browser's: reload the costs page and download again"})
		return
	}
	month, err := monthParam(r, "month", h.cfg.Clock().UTC())
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err)
		return
	}
	format, ext, ctype := "focus", "csv", "text/csv; charset=utf-8"
	switch r.PostForm.Get("format") {
	case "", "csv":
	case "parquet":
		format, ext, ctype = "focus-parquet", "parquet", "application/vnd.apache.parquet"
	default:
		h.fail(w, r, http.StatusBadRequest, &badParam{"format", "csv or parquet"})
		return
	}
	end := month.AddDate(0, 1, 0)
	s := &billStream{ctx: h.ctx(r), w: w, header: func() {
		w.Header().Set("Content-Type", ctype)
		w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="corral-focus-%s.%s"`, month.Format("2006-01"), ext))
	}}
	err = h.cfg.API.ExportBill(&apipb.BillRequest{FromUs: month.UnixMicro(), ToUs: end.UnixMicro(), Format: format, Granularity: "job"}, s)
	switch {
	case err != nil && !s.started:
		http.Error(w, status.Convert(err).Message(), httpStatus(err))
	case err != nil:
		// Part of the file went out: the client sees it cut short.
		h.cfg.Logger.Error("webui: FOCUS download cut short", "month", month.Format("2006-01"), "err", err)
	}
}

// billStream adapts an HTTP response to the API's ExportBill stream: the
// headers go out with the first chunk, so an export refused at once is
// still answered with its status.
type billStream struct {
	ctx     context.Context
	w       http.ResponseWriter
	header  func()
	started bool
}

func (s *billStream) Send(c *apipb.BillChunk) error {
	if !s.started {
		s.header()
		s.started = true
	}
	_, err := s.w.Write(c.Data)
	return err
}

func (s *billStream) SetHeader(metadata.MD) error  { return nil }
func (s *billStream) SendHeader(metadata.MD) error { return nil }
func (s *billStream) SetTrailer(metadata.MD)       {}
func (s *billStream) Context() context.Context     { return s.ctx }
func (s *billStream) RecvMsg(any) error            { return nil }

func (s *billStream) SendMsg(m any) error {
	c, ok := m.(*apipb.BillChunk)
	if !ok {
		return fmt.Errorf("webui: the bill stream sends BillChunk, not %T", m)
	}
	return s.Send(c)
}

var _ apipb.Cell_ExportBillServer = (*billStream)(nil)

func parseMoney(s string) float64 {
	v, _ := strconv.ParseFloat(s, 64)
	return v
}
