package webui

import (
	"encoding/csv"
	"net/http"
	"net/url"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/corralhq/corral/commands/apipb"
)

// sqlShown is how many result rows the console shows; the CSV holds all
// the Infrastore returned.
const sqlShown = 1000

// sqlTimeout is the time limit the console asks for; the master caps it.
const sqlTimeout = 30 * time.Second

var sqlExamples = []string{
	"SELECT count(*) FROM task_events",
	"SELECT type, count(*) AS n FROM events GROUP BY type ORDER BY n DESC",
	"SELECT * FROM task_events ORDER BY position DESC LIMIT 20",
	"SHOW TABLES",
}

type sqlData struct {
	Query     string
	Examples  []sqlExample
	Result    *apipb.QueryReply
	Rows      [][]sqlCell
	Err       string
	NoStore   bool
	CSV       string
	Elapsed   string
	Truncated bool
}

type sqlExample struct{ SQL, Href string }

type sqlCell struct {
	Text string
	Null bool
}

func (h *Handler) sql(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	d := sqlData{Query: strings.TrimSpace(q.Get("q"))}
	for _, e := range sqlExamples {
		d.Examples = append(d.Examples, sqlExample{e, "/sql?" + url.Values{"q": {e}}.Encode()})
	}
	format := q.Get("format")
	if format != "" && format != "csv" {
		h.fail(w, r, http.StatusBadRequest, &badParam{"format", "only csv is offered"})
		return
	}
	if d.Query == "" {
		if format == "csv" {
			h.fail(w, r, http.StatusBadRequest, &badParam{"q", "must not be empty"})
			return
		}
		h.render(w, r, "sql", page{Title: "SQL", Nav: "sql", Data: d})
		return
	}
	start := time.Now()
	res, err := h.cfg.API.Query(h.ctx(r), &apipb.QueryRequest{Sql: d.Query, TimeoutMs: sqlTimeout.Milliseconds()})
	if err != nil {
		code := httpStatus(err)
		if format == "csv" {
			http.Error(w, status.Convert(err).Message(), code)
			return
		}
		d.Err = status.Convert(err).Message()
		d.NoStore = status.Code(err) == codes.Unimplemented
		w.WriteHeader(code)
		h.render(w, r, "sql", page{Title: "SQL", Nav: "sql", Data: d})
		return
	}
	if format == "csv" {
		w.Header().Set("Content-Type", "text/csv; charset=utf-8")
		w.Header().Set("Content-Disposition", `attachment; filename="corral-query.csv"`)
		cw := csv.NewWriter(w)
		_ = cw.Write(res.Columns)
		for _, row := range res.Rows {
			vals := make([]string, len(row.Values))
			for i, v := range row.Values {
				if i < len(row.Null) && row.Null[i] {
					v = "" // NULL is an empty field, as the Infrastore writes CSV
				}
				vals[i] = v
			}
			_ = cw.Write(vals)
		}
		cw.Flush()
		return
	}
	d.Elapsed = time.Since(start).Round(time.Millisecond).String()
	d.Result = res
	rows := res.Rows
	if len(rows) > sqlShown {
		rows, d.Truncated = rows[:sqlShown], true
	}
	for _, row := range rows {
		cells := make([]sqlCell, len(row.Values))
		for i, v := range row.Values {
			cells[i] = sqlCell{Text: v, Null: i < len(row.Null) && row.Null[i]}
		}
		d.Rows = append(d.Rows, cells)
	}
	d.CSV = "/sql?" + url.Values{"q": {d.Query}, "format": {"csv"}}.Encode()
	h.render(w, r, "sql", page{Title: "SQL", Nav: "sql", Data: d})
}
