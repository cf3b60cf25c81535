package webui

import (
	"cmp"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/corralhq/corral/commands/apipb"
)

// The diff page says what changed in the cell between two points of its
// log, picked on the cell page: the master's StateDiff, which replays the
// log to both points and compares them (projections.Diff).

type diffData struct {
	From, To  string // as given, for the form
	FromPos   int64
	FromUS    int64
	ToPos     int64
	ToUS      int64
	Total     int
	Counts    []diffCount
	Rows      []diffRow
	Truncated bool
	// IDPrefix keeps the form's element ids apart from the page's.
	IDPrefix string
}

type diffCount struct {
	What  string
	Count int32
}

type diffRow struct {
	Kind, Name, What, Before, After, Href string
}

// diffRowLimit is the most changes the page lists; the counts cover all.
const diffRowLimit = 2000

// pointParam reads a point of the log: a position (digits), or a time as
// the browser's datetime-local input sends it or as RFC 3339; a time
// without a zone is UTC. Missing is def.
func pointParam(r *http.Request, name string, def time.Time) (pos int64, us int64, err error) {
	v := strings.TrimSpace(r.URL.Query().Get(name))
	if v == "" {
		return 0, def.UnixMicro(), nil
	}
	if p, err := strconv.ParseInt(v, 10, 64); err == nil {
		if p < 1 {
			return 0, 0, &badParam{name, fmt.Sprintf("position %d: positions start at 1", p)}
		}
		return p, 0, nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04"} {
		if t, err := time.Parse(layout, v); err == nil {
			if t.Year() < 2000 || t.Year() > 9999 {
				break
			}
			return 0, t.UnixMicro(), nil
		}
	}
	return 0, 0, &badParam{name, fmt.Sprintf("%q is neither a log position nor a time (2026-11-26T14:02 UTC, or RFC 3339)", v)}
}

func (h *Handler) diff(w http.ResponseWriter, r *http.Request) {
	now := h.cfg.Clock()
	d := diffData{From: r.URL.Query().Get("from"), To: r.URL.Query().Get("to"), IDPrefix: "d"}
	if d.From == "" {
		h.fail(w, r, http.StatusBadRequest, &badParam{"from", "give the earlier point: a log position or a time"})
		return
	}
	fromPos, fromUS, err := pointParam(r, "from", now)
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err)
		return
	}
	toPos, toUS, err := pointParam(r, "to", now)
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err)
		return
	}
	v, err := h.cfg.API.StateDiff(h.ctx(r), &apipb.StateDiffRequest{
		FromPosition: fromPos, FromTimeUs: fromUS, ToPosition: toPos, ToTimeUs: toUS, Limit: diffRowLimit,
	})
	if err != nil {
		h.failAPI(w, r, err)
		return
	}
	d.FromPos, d.FromUS, d.ToPos, d.ToUS, d.Total = v.FromPosition, v.FromTimeUs, v.ToPosition, v.ToTimeUs, int(v.Total)
	d.Truncated = len(v.Changes) < int(v.Total)
	for what, n := range v.Counts {
		d.Counts = append(d.Counts, diffCount{what, n})
	}
	slices.SortFunc(d.Counts, func(a, b diffCount) int { return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.What, b.What)) })
	for _, ch := range v.Changes {
		d.Rows = append(d.Rows, diffRow{Kind: ch.Kind, Name: ch.Name, What: ch.What, Before: ch.Before, After: ch.After, Href: changeHref(ch)})
	}
	h.render(w, r, "diff", page{Title: "What changed", Nav: "cell", Data: d})
}

// changeHref links a change to the page of what changed, where there is one.
func changeHref(ch *apipb.StateChange) string {
	parts := strings.Split(ch.Name, "/")
	switch {
	case ch.Kind == "machine":
		return "/machines/" + url.PathEscape(ch.Name)
	case ch.Kind == "job" && len(parts) == 2:
		return "/jobs/" + url.PathEscape(parts[0]) + "/" + url.PathEscape(parts[1])
	case ch.Kind == "task" && len(parts) == 3:
		return "/jobs/" + url.PathEscape(parts[0]) + "/" + url.PathEscape(parts[1]) + "/tasks/" + url.PathEscape(parts[2])
	}
	return ""
}
