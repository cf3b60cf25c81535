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
	CSRF      string // the console's form token (csrf.go)
	Elapsed   string
	Truncated bool
	Schema    []schemaTable // the schema panel (sql_schema.go)
	SchemaErr string        // why the panel is empty
}

type sqlExample struct{ SQL, Href string }

type sqlCell struct {
	Text string
	Null bool
}

// sqlForm shows the console, with a query from ?q= (an example's link)
// filled in but not run: running a query costs the Infrastore, so it is a
// POST with the page's CSRF token, which another site cannot send.
func (h *Handler) sqlForm(w http.ResponseWriter, r *http.Request) {
	d := h.sqlPage(w, r, r.URL.Query().Get("q"))
	if r.URL.Query().Get("format") != "" {
		h.fail(w, r, http.StatusMethodNotAllowed, &badParam{"format", "a CSV download is a POST from the console's form"})
		return
	}
	h.renderSQL(w, r, d)
}

func (h *Handler) sqlPage(w http.ResponseWriter, r *http.Request, q string) sqlData {
	d := sqlData{Query: strings.TrimSpace(q), CSRF: h.csrfToken(w, r)}
	for _, e := range sqlExamples {
		d.Examples = append(d.Examples, sqlExample{e, "/sql?" + url.Values{"q": {e}}.Encode()})
	}
	return d
}

// sql runs the console's query (POST).
func (h *Handler) sql(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		h.fail(w, r, http.StatusBadRequest, &badParam{"q", "the form does not parse: " + err.Error()})
		return
	}
	if !h.csrfValid(r) {
		h.fail(w, r, http.StatusForbidden, &badParam{"csrf", "the form's token does not match this browser's: reload the console and submit it again"})
		return
	}
	d := h.sqlPage(w, r, r.PostForm.Get("q"))
	format := r.PostForm.Get("format")
	if format != "" && format != "csv" {
		h.fail(w, r, http.StatusBadRequest, &badParam{"format", "only csv is offered"})
		return
	}
	if d.Query == "" {
		if format == "csv" {
			h.fail(w, r, http.StatusBadRequest, &badParam{"q", "must not be empty"})
			return
		}
		h.renderSQL(w, r, d)
		return
	}
	start := time.Now()
	res, err := h.cfg.API.Query(h.ctx(r), &apipb.QueryRequest{Sql: d.Query, TimeoutMs: sqlTimeout.Milliseconds()})
	if err != nil {
		code := sqlStatus(err)
		if format == "csv" {
			http.Error(w, status.Convert(err).Message(), code)
			return
		}
		if status.Code(err) == codes.PermissionDenied {
			// The rule refuses this viewer the console itself, as GET
			// does: an error page, not the form around the refusal.
			h.failAPI(w, r, err)
			return
		}
		d.Err = status.Convert(err).Message()
		d.NoStore = status.Code(err) == codes.Unimplemented
		w.WriteHeader(code)
		h.renderSQL(w, r, d)
		return
	}
	if format == "csv" {
		writeCSV(w, res)
		return
	}
	d.Elapsed = time.Since(start).Round(time.Millisecond).String()
	d.Result = res
	d.shown(res)
	h.renderSQL(w, r, d)
}

// writeCSV sends a query's result as a CSV file.
func writeCSV(w http.ResponseWriter, res *apipb.QueryReply) {
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	name := "corral-query.csv"
	if res.Truncated {
		// A cut file says so where it is kept (its name) and to a
		// program that downloads it (the header); a row in it would
		// be read as data.
		name = "corral-query-truncated.csv"
		w.Header().Set(TruncatedHeader, truncatedBy(res))
	}
	w.Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
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
}

// shown fills the rows the console shows of a query's result, at most
// sqlShown.
func (d *sqlData) shown(res *apipb.QueryReply) {
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
}

// renderSQL shows the console with its schema panel.
func (h *Handler) renderSQL(w http.ResponseWriter, r *http.Request, d sqlData) {
	var err error
	d.Schema, err = h.schema(r)
	if status.Code(err) == codes.PermissionDenied {
		// The API's rule (commands.MayQueryCell) refuses this viewer the
		// console; the page says so as the API does, not an empty form.
		h.failAPI(w, r, err)
		return
	}
	if err != nil {
		d.SchemaErr = status.Convert(err).Message()
	}
	h.render(w, r, "sql", page{Title: "SQL", Nav: "sql", Script: "sql.js", Data: d})
}

// TruncatedHeader, on a CSV download of the console, says the Infrastore
// cut the result, and at which limit.
const TruncatedHeader = "X-Corral-Truncated"

func truncatedBy(res *apipb.QueryReply) string {
	if res.TruncatedBy != "" {
		return "cut at " + res.TruncatedBy
	}
	return "cut at a limit of the Infrastore"
}

// sqlStatus is the HTTP status of a query's error: one that asks more
// memory than the Infrastore allows is the query's doing (422), not the
// server's.
func sqlStatus(err error) int {
	if status.Code(err) == codes.ResourceExhausted {
		return http.StatusUnprocessableEntity
	}
	return httpStatus(err)
}
