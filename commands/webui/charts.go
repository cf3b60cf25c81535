package webui

import (
	"cmp"
	"fmt"
	"html/template"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Charts are drawn on the server as inline SVG: no script, no library, no
// request of their own, and they print and scale with the page. Each chart
// is a <figure> whose caption says what it shows in words and whose data
// sits in a table inside <details>, for readers that cannot see it.

// point is one sample: a time in microseconds and a value.
type point struct {
	T int64
	V float64
}

// series is one line of a line chart.
type series struct {
	Name   string
	Class  string // CSS class giving the line's colour and dash: usage, reservation, limit
	Points []point
	Step   bool // hold each value until the next point (limits, reservations)
}

// lineChart plots series over time.
type lineChart struct {
	ID       string // prefix of the figure's element ids
	Title    string
	Unit     func(float64) string
	From, To int64 // the time range, microseconds
	Series   []series
}

const (
	chartW, chartH             = 640, 200
	padL, padR, padT, padB     = 70, 12, 10, 26
	plotW, plotH               = chartW - padL - padR, chartH - padT - padB
	maxTableRows               = 30
	barLabelW, barValueW, barH = 110, 150, 9
)

func f1(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// niceMax rounds v up to 1, 2 or 5 times a power of ten.
func niceMax(v float64) float64 {
	if v <= 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

// HTML renders the chart as a figure.
func (c lineChart) HTML() template.HTML {
	var b strings.Builder
	esc := template.HTMLEscapeString
	if c.To <= c.From {
		c.To = c.From + 1
	}
	ymax := 0.0
	n := 0
	for _, s := range c.Series {
		for _, p := range s.Points {
			ymax = max(ymax, p.V)
			n++
		}
	}
	p := linePlot{c: c, ymax: niceMax(ymax * 1.05)}
	fmt.Fprintf(&b, `<figure class="chart" aria-labelledby="%s-cap">`, esc(c.ID))
	fmt.Fprintf(&b, `<figcaption id="%s-cap">%s</figcaption>`, esc(c.ID), esc(c.Title))
	fmt.Fprintf(&b, `<svg viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-labelledby="%s-cap %s-sum" focusable="false">`,
		chartW, chartH, chartW, chartH, esc(c.ID), esc(c.ID))
	p.axes(&b)
	p.lines(&b)
	b.WriteString(`</svg>`)
	c.legend(&b)
	if n > 0 {
		c.table(&b)
	}
	b.WriteString(`</figure>`)
	return template.HTML(b.String())
}

// linePlot places a line chart's points in its drawing.
type linePlot struct {
	c    lineChart
	ymax float64
}

func (p linePlot) x(t int64) float64 {
	t = min(max(t, p.c.From), p.c.To)
	return padL + float64(t-p.c.From)/float64(p.c.To-p.c.From)*plotW
}

func (p linePlot) y(v float64) float64 { return padT + plotH - v/p.ymax*plotH }

// axes draws the grid with the y axis's ticks, and five times on the x axis.
func (p linePlot) axes(b *strings.Builder) {
	esc := template.HTMLEscapeString
	c := p.c
	for i := 0; i <= 4; i++ {
		v := p.ymax * float64(i) / 4
		yy := p.y(v)
		fmt.Fprintf(b, `<line class="grid" x1="%d" x2="%d" y1="%s" y2="%s"/>`, padL, chartW-padR, f1(yy), f1(yy))
		fmt.Fprintf(b, `<text class="tick" x="%d" y="%s" text-anchor="end">%s</text>`, padL-4, f1(yy+4), esc(c.Unit(v)))
	}
	// X axis: five times.
	span := time.Duration(c.To-c.From) * time.Microsecond
	layout := "15:04:05"
	switch {
	case span < 20*time.Second:
		layout = "15:04:05.0"
	case span > 48*time.Hour:
		layout = "01-02 15:04"
	}
	for i := 0; i <= 4; i++ {
		t := c.From + (c.To-c.From)*int64(i)/4
		anchor := "middle"
		switch i {
		case 0:
			anchor = "start"
		case 4:
			anchor = "end"
		}
		fmt.Fprintf(b, `<text class="tick" x="%s" y="%d" text-anchor="%s">%s</text>`, f1(p.x(t)), chartH-8, anchor, time.UnixMicro(t).UTC().Format(layout))
	}
}

// lines draws each series, downsampled to the plot's width.
func (p linePlot) lines(b *strings.Builder) {
	esc := template.HTMLEscapeString
	c := p.c
	for _, s := range c.Series {
		pts := downsample(s.Points, plotW)
		if len(pts) == 0 {
			continue
		}
		var d strings.Builder
		for i, pt := range pts {
			if i > 0 && s.Step {
				fmt.Fprintf(&d, "%s,%s ", f1(p.x(pt.T)), f1(p.y(pts[i-1].V)))
			}
			fmt.Fprintf(&d, "%s,%s ", f1(p.x(pt.T)), f1(p.y(pt.V)))
		}
		if s.Step {
			// A held value lasts to the end of the range.
			fmt.Fprintf(&d, "%s,%s", f1(p.x(c.To)), f1(p.y(pts[len(pts)-1].V)))
		}
		fmt.Fprintf(b, `<polyline class="line %s" points="%s"/>`, esc(s.Class), strings.TrimSpace(d.String()))
		if len(pts) == 1 && !s.Step {
			fmt.Fprintf(b, `<circle class="dot %s" cx="%s" cy="%s" r="3"/>`, esc(s.Class), f1(p.x(pts[0].T)), f1(p.y(pts[0].V)))
		}
	}
}

// legend names the series and sums each up in words: its last value and
// its peak.
func (c lineChart) legend(b *strings.Builder) {
	esc := template.HTMLEscapeString
	b.WriteString(`<ul class="legend">`)
	var sum []string
	for _, s := range c.Series {
		fmt.Fprintf(b, `<li><span class="swatch %s" aria-hidden="true"></span>%s</li>`, esc(s.Class), esc(s.Name))
		if len(s.Points) == 0 {
			sum = append(sum, s.Name+": no samples")
			continue
		}
		peak := 0.0
		for _, p := range s.Points {
			peak = max(peak, p.V)
		}
		sum = append(sum, fmt.Sprintf("%s: last %s, peak %s", s.Name, c.Unit(s.Points[len(s.Points)-1].V), c.Unit(peak)))
	}
	b.WriteString(`</ul>`)
	fmt.Fprintf(b, `<p class="chart-summary" id="%s-sum">%s.</p>`, esc(c.ID), esc(strings.Join(sum, "; ")))
}

// table writes the chart's latest samples as a table.
func (c lineChart) table(b *strings.Builder) {
	esc := template.HTMLEscapeString
	// One row per time, newest first, a column per series.
	times := map[int64]bool{}
	for _, s := range c.Series {
		for _, p := range s.Points {
			times[p.T] = true
		}
	}
	ts := make([]int64, 0, len(times))
	for t := range times {
		ts = append(ts, t)
	}
	slices.SortFunc(ts, func(a, b int64) int { return cmp.Compare(b, a) })
	if len(ts) > maxTableRows {
		ts = ts[:maxTableRows]
	}
	fmt.Fprintf(b, `<details><summary>Data (latest %d samples)</summary><table><caption>%s</caption><thead><tr><th scope="col">time</th>`, len(ts), esc(c.Title))
	for _, s := range c.Series {
		fmt.Fprintf(b, `<th scope="col">%s</th>`, esc(s.Name))
	}
	b.WriteString(`</tr></thead><tbody>`)
	for _, t := range ts {
		fmt.Fprintf(b, `<tr><th scope="row">%s</th>`, formatUS(t))
		for _, s := range c.Series {
			v, ok := valueAt(s, t)
			cell := "–"
			if ok {
				cell = c.Unit(v)
			}
			fmt.Fprintf(b, `<td class="num">%s</td>`, esc(cell))
		}
		b.WriteString(`</tr>`)
	}
	b.WriteString(`</tbody></table></details>`)
}

// valueAt is a series' value at t: the sample at t, or for a step series
// the last sample before it.
func valueAt(s series, t int64) (float64, bool) {
	v, ok := 0.0, false
	for _, p := range s.Points {
		if p.T == t {
			return p.V, true
		}
		if s.Step && p.T < t {
			v, ok = p.V, true
		}
	}
	return v, ok
}

// downsample keeps at most n points: the highest of each run, so peaks
// stay visible.
func downsample(pts []point, n int) []point {
	if len(pts) <= n {
		return pts
	}
	out := make([]point, 0, n)
	per := float64(len(pts)) / float64(n)
	for i := 0; i < n; i++ {
		lo, hi := int(float64(i)*per), int(float64(i+1)*per)
		best := pts[lo]
		for _, p := range pts[lo:min(hi, len(pts))] {
			if p.V > best.V {
				best = p
			}
		}
		out = append(out, best)
	}
	return out
}

// bar is one bar of a bar group.
type bar struct {
	Name  string
	Class string
	Value float64
}

// barGroup is one row of a bar chart: a label and its bars.
type barGroup struct {
	Label string
	Bars  []bar
}

// barChart draws horizontal bars against a capacity.
type barChart struct {
	ID       string
	RowName  string // what a group is, heading the data table's first column
	Title    string
	Unit     func(float64) string
	Capacity float64 // drawn as a line; the scale reaches it or the largest bar
	Groups   []barGroup
}

// HTML renders the chart as a figure, its numbers in a table.
func (c barChart) HTML() template.HTML {
	var b strings.Builder
	c.svg(&b)
	c.legend(&b)
	c.table(&b)
	return template.HTML(b.String())
}

// svg draws the bars, grouped, scaled so that the longest bar or the
// capacity line fills the width.
func (c barChart) svg(b *strings.Builder) {
	esc := template.HTMLEscapeString
	scale := c.Capacity
	for _, g := range c.Groups {
		for _, br := range g.Bars {
			scale = max(scale, br.Value)
		}
	}
	if scale <= 0 {
		scale = 1
	}
	groupH := 0
	if len(c.Groups) > 0 {
		groupH = len(c.Groups[0].Bars)*(barH+2) + 10
	}
	height := padT + groupH*len(c.Groups) + 16
	areaW := float64(chartW - barLabelW - barValueW)
	w := func(v float64) float64 { return max(0, v/scale*areaW) }
	fmt.Fprintf(b, `<figure class="chart" aria-labelledby="%s-cap">`, esc(c.ID))
	fmt.Fprintf(b, `<figcaption id="%s-cap">%s</figcaption>`, esc(c.ID), esc(c.Title))
	fmt.Fprintf(b, `<svg viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-labelledby="%s-cap" aria-describedby="%s-tab" focusable="false">`,
		chartW, height, chartW, height, esc(c.ID), esc(c.ID))
	yy := padT
	for _, g := range c.Groups {
		fmt.Fprintf(b, `<text class="label" x="0" y="%d">%s</text>`, yy+len(g.Bars)*(barH+2)/2+4, esc(g.Label))
		for i, br := range g.Bars {
			top := yy + i*(barH+2)
			fmt.Fprintf(b, `<rect class="bar %s" x="%d" y="%d" width="%s" height="%d"><title>%s %s: %s</title></rect>`,
				esc(br.Class), barLabelW, top, f1(w(br.Value)), barH, esc(g.Label), esc(br.Name), esc(c.Unit(br.Value)))
			fmt.Fprintf(b, `<text class="tick" x="%s" y="%d">%s</text>`, f1(float64(barLabelW)+w(br.Value)+4), top+barH-1, esc(c.Unit(br.Value)))
		}
		yy += groupH
	}
	if c.Capacity > 0 {
		cx := f1(float64(barLabelW) + w(c.Capacity))
		fmt.Fprintf(b, `<line class="capacity" x1="%s" x2="%s" y1="%d" y2="%d"/>`, cx, cx, padT-4, yy)
		fmt.Fprintf(b, `<text class="tick" x="%s" y="%d" text-anchor="middle">capacity %s</text>`, cx, yy+12, esc(c.Unit(c.Capacity)))
	}
}

// legend closes the drawing and names the bars of a group.
func (c barChart) legend(b *strings.Builder) {
	esc := template.HTMLEscapeString
	b.WriteString(`</svg><ul class="legend">`)
	if len(c.Groups) > 0 {
		for _, br := range c.Groups[0].Bars {
			fmt.Fprintf(b, `<li><span class="swatch %s" aria-hidden="true"></span>%s</li>`, esc(br.Class), esc(br.Name))
		}
	}
	b.WriteString(`</ul>`)
}

// table is the chart's figures as a table, for those who cannot see it.
func (c barChart) table(b *strings.Builder) {
	esc := template.HTMLEscapeString
	fmt.Fprintf(b, `<details><summary>Data</summary><table id="%s-tab"><caption>%s (capacity %s)</caption><thead><tr><th scope="col">%s</th>`,
		esc(c.ID), esc(c.Title), esc(c.Unit(c.Capacity)), esc(c.RowName))
	if len(c.Groups) > 0 {
		for _, br := range c.Groups[0].Bars {
			fmt.Fprintf(b, `<th scope="col">%s</th>`, esc(br.Name))
		}
	}
	b.WriteString(`</tr></thead><tbody>`)
	for _, g := range c.Groups {
		fmt.Fprintf(b, `<tr><th scope="row">%s</th>`, esc(g.Label))
		for _, br := range g.Bars {
			fmt.Fprintf(b, `<td class="num">%s</td>`, esc(c.Unit(br.Value)))
		}
		b.WriteString(`</tr>`)
	}
	b.WriteString(`</tbody></table></details></figure>`)
}

// columnChart draws counts per time bucket (the event rate).
type columnChart struct {
	ID       string
	Title    string
	From, To int64 // microseconds
	Counts   []int
}

// HTML renders the chart as a figure.
func (c columnChart) HTML() template.HTML {
	var b strings.Builder
	esc := template.HTMLEscapeString
	peak := 0
	for _, n := range c.Counts {
		peak = max(peak, n)
	}
	ymax := niceMax(float64(peak))
	const h = 120
	ph := float64(h - padT - padB)
	fmt.Fprintf(&b, `<figure class="chart" aria-labelledby="%s-cap">`, esc(c.ID))
	fmt.Fprintf(&b, `<figcaption id="%s-cap">%s</figcaption>`, esc(c.ID), esc(c.Title))
	fmt.Fprintf(&b, `<svg viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-labelledby="%s-cap %s-sum" focusable="false">`, chartW, h, chartW, h, esc(c.ID), esc(c.ID))
	for i := 0; i <= 2; i++ {
		v := ymax * float64(i) / 2
		yy := float64(padT) + ph - v/ymax*ph
		fmt.Fprintf(&b, `<line class="grid" x1="%d" x2="%d" y1="%s" y2="%s"/>`, padL, chartW-padR, f1(yy), f1(yy))
		fmt.Fprintf(&b, `<text class="tick" x="%d" y="%s" text-anchor="end">%s</text>`, padL-4, f1(yy+4), strconv.FormatFloat(v, 'f', -1, 64))
	}
	if len(c.Counts) > 0 {
		bw := float64(plotW) / float64(len(c.Counts))
		for i, n := range c.Counts {
			bh := float64(n) / ymax * ph
			fmt.Fprintf(&b, `<rect class="bar usage" x="%s" y="%s" width="%s" height="%s"/>`,
				f1(float64(padL)+float64(i)*bw+1), f1(float64(padT)+ph-bh), f1(max(bw-2, 1)), f1(bh))
		}
	}
	for i, t := range []int64{c.From, c.To} {
		anchor := []string{"start", "end"}[i]
		xx := []int{padL, chartW - padR}[i]
		fmt.Fprintf(&b, `<text class="tick" x="%d" y="%d" text-anchor="%s">%s</text>`, xx, h-8, anchor, time.UnixMicro(t).UTC().Format("15:04:05"))
	}
	b.WriteString(`</svg>`)
	total := 0
	for _, n := range c.Counts {
		total += n
	}
	fmt.Fprintf(&b, `<p class="chart-summary" id="%s-sum">%d events in %d buckets from %s to %s; busiest bucket %d.</p></figure>`,
		esc(c.ID), total, len(c.Counts), formatUS(c.From), formatUS(c.To), peak)
	return template.HTML(b.String())
}
