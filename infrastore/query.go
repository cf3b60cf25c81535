package infrastore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"strconv"
	"strings"
	"time"

	duckdb "github.com/duckdb/duckdb-go/v2"
)

// MaxQueryBytes bounds the text of a query.
const MaxQueryBytes = 1 << 20

// Result is a query's answer: column names, DuckDB type names and rows. The
// values are Go values: nil (NULL), bool, integers, float64, string, []byte,
// time.Time, Decimal, *big.Int, json.RawMessage (JSON columns), and []any or
// map[string]any for lists, structs and maps. WriteTable, WriteCSV and
// WriteJSON print it.
type Result struct {
	Columns   []string
	Types     []string
	Rows      [][]any
	Truncated bool // the query returned more than the limits let through; the rest were dropped
	// TruncatedBy names the limit that cut the result ("the 100000-row
	// limit", "the 16777216-byte limit").
	TruncatedBy string
}

// Cell returns row i's value in column j as text, as the API sends it,
// and whether it is NULL.
func (r *Result) Cell(i, j int) (string, bool) {
	v := r.Rows[i][j]
	if v == nil {
		return "", true
	}
	return formatValue(v, r.Types[j]), false
}

// Query runs one read-only statement and returns its result.
//
// The statement is accepted only when DuckDB parses it as a single SELECT
// (which includes WITH ... SELECT, VALUES, FROM-first queries, DESCRIBE, SHOW
// and SUMMARIZE) or as an EXPLAIN of one; anything else is refused with
// ErrQueryRefused before it runs. It then runs in a READ ONLY transaction on
// a database with no file, network or extension access and a locked
// configuration, so that even a statement the check let through cannot
// write, read files or change settings. Past timeout (Options.QueryTimeout
// when 0) it is interrupted and Query returns ErrQueryTimeout.
func (s *Infrastore) Query(ctx context.Context, query string, timeout time.Duration) (*Result, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	switch {
	case strings.TrimSpace(query) == "":
		return nil, fmt.Errorf("%w: query: must not be empty", ErrInvalid)
	case len(query) > MaxQueryBytes:
		return nil, fmt.Errorf("%w: query: longer than %d bytes", ErrInvalid, MaxQueryBytes)
	case timeout < 0:
		return nil, fmt.Errorf("%w: timeout: must not be negative", ErrInvalid)
	case timeout == 0:
		timeout = s.opts.QueryTimeout
	}
	qctx, cancel := context.WithTimeoutCause(ctx, timeout, errPastTimeLimit)
	defer cancel()
	qctx, stop := s.memory.watch(qctx)
	defer stop()
	res, err := s.readOnly(qctx, func(conn *sql.Conn) (*Result, error) { return s.runQuery(qctx, conn, query) })
	if err != nil {
		return nil, s.queryError(ctx, qctx, timeout, err)
	}
	return res, nil
}

// runQuery checks query, bounds a SELECT's result, and runs it on conn.
func (s *Infrastore) runQuery(ctx context.Context, conn *sql.Conn, query string) (*Result, error) {
	text, err := s.checkQuery(ctx, conn, query)
	if err != nil {
		return nil, err
	}
	var cols []resultColumn
	var typ duckdb.StmtType
	err = conn.Raw(func(dc any) error {
		stmt, t, err := prepareReadOnly(dc.(driver.Conn), text)
		if err != nil {
			return err
		}
		defer stmt.Close()
		typ = t
		cols, err = columnsOf(stmt)
		return err
	})
	if err != nil {
		return nil, err
	}
	bounded := typ == duckdb.STATEMENT_TYPE_SELECT
	if bounded {
		// The text that runs is checked as the user's was: the
		// subquery can only be the statement the guard passed.
		text = boundedSelect(text, cols, s.opts.MaxRows, s.opts.MaxResultBytes)
		node, err := s.parse(ctx, conn, text)
		if err != nil {
			return nil, fmt.Errorf("infrastore: bounding the query: %w", err)
		}
		if err := s.checkNode(node); err != nil {
			return nil, err
		}
	}
	var res *Result
	err = conn.Raw(func(dc any) error {
		stmt, _, err := prepareReadOnly(dc.(driver.Conn), text)
		if err != nil {
			return err
		}
		defer stmt.Close()
		res, err = fetch(ctx, stmt, cols, bounded, s.opts.MaxRows, s.opts.MaxResultBytes)
		return err
	})
	return res, err
}

// queryError is what Query returns for err, the failure of a query run
// under qctx (derived from the caller's ctx, with the time limit timeout).
func (s *Infrastore) queryError(ctx, qctx context.Context, timeout time.Duration, err error) error {
	switch {
	case errors.Is(err, ErrQueryRefused), errors.Is(err, ErrInvalid):
		return err
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(context.Cause(qctx), errPastTimeLimit):
		return fmt.Errorf("%w: it ran past its time limit of %s", ErrQueryTimeout, timeout)
	}
	var me *memoryExceeded
	if errors.As(context.Cause(qctx), &me) {
		return fmt.Errorf("%w: stopped when the Infrastore process held %s of its %s memory budget; the query needs more memory than that", ErrQueryTooBig, formatBytes(me.held), formatBytes(me.budget))
	}
	var ut *unreadableType
	if errors.As(err, &ut) {
		return fmt.Errorf("%w: %s", ErrInvalid, ut)
	}
	var de *duckdb.Error
	if errors.As(err, &de) {
		switch de.Type {
		case duckdb.ErrorTypePermission:
			return fmt.Errorf("%w: %s", ErrQueryRefused, de.Msg)
		case duckdb.ErrorTypeOutOfMemory:
			return fmt.Errorf("%w: the query needs more memory than the Infrastore's limit (%s): %s", ErrQueryTooBig, s.opts.MemoryLimit, de.Msg)
		case duckdb.ErrorTypeInternal, duckdb.ErrorTypeFatal, duckdb.ErrorTypeIO, duckdb.ErrorTypeConnection, duckdb.ErrorTypeTransaction:
			return fmt.Errorf("infrastore: query failed: %w", err)
		}
		// Everything else is a mistake in the query: a name that
		// does not exist, a bad cast, a division by zero.
		return fmt.Errorf("%w: %s", ErrInvalid, de.Msg)
	}
	return fmt.Errorf("infrastore: query failed: %w", err)
}

// readOnly runs fn on a fresh connection inside a READ ONLY transaction,
// always rolled back.
func (s *Infrastore) readOnly(ctx context.Context, fn func(conn *sql.Conn) (*Result, error)) (*Result, error) {
	var res *Result
	err := s.inReadOnly(ctx, func(conn *sql.Conn) (err error) {
		res, err = fn(conn)
		return err
	})
	return res, err
}

// inReadOnly runs fn on a fresh connection inside a READ ONLY transaction:
// it sees the last committed batch and never blocks ingestion.
func (s *Infrastore) inReadOnly(ctx context.Context, fn func(conn *sql.Conn) error) error {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN TRANSACTION READ ONLY"); err != nil {
		return err
	}
	defer func() {
		// Nothing to keep, and the connection goes back to the pool clean.
		_, _ = conn.ExecContext(context.Background(), "ROLLBACK")
	}()
	return fn(conn)
}

// statementNames names the statement types a query may not be.
var statementNames = map[duckdb.StmtType]string{
	duckdb.STATEMENT_TYPE_INSERT: "INSERT", duckdb.STATEMENT_TYPE_UPDATE: "UPDATE",
	duckdb.STATEMENT_TYPE_DELETE: "DELETE", duckdb.STATEMENT_TYPE_PREPARE: "PREPARE",
	duckdb.STATEMENT_TYPE_CREATE: "CREATE", duckdb.STATEMENT_TYPE_EXECUTE: "EXECUTE",
	duckdb.STATEMENT_TYPE_ALTER: "ALTER", duckdb.STATEMENT_TYPE_TRANSACTION: "a transaction statement",
	duckdb.STATEMENT_TYPE_COPY: "COPY", duckdb.STATEMENT_TYPE_ANALYZE: "ANALYZE",
	duckdb.STATEMENT_TYPE_VARIABLE_SET: "SET VARIABLE", duckdb.STATEMENT_TYPE_CREATE_FUNC: "CREATE FUNCTION",
	duckdb.STATEMENT_TYPE_DROP: "DROP", duckdb.STATEMENT_TYPE_EXPORT: "EXPORT",
	duckdb.STATEMENT_TYPE_PRAGMA: "PRAGMA", duckdb.STATEMENT_TYPE_VACUUM: "VACUUM",
	duckdb.STATEMENT_TYPE_CALL: "CALL", duckdb.STATEMENT_TYPE_SET: "SET",
	duckdb.STATEMENT_TYPE_LOAD: "LOAD or INSTALL", duckdb.STATEMENT_TYPE_RELATION: "a relation",
	duckdb.STATEMENT_TYPE_EXTENSION: "an extension statement", duckdb.STATEMENT_TYPE_LOGICAL_PLAN: "a logical plan",
	duckdb.STATEMENT_TYPE_ATTACH: "ATTACH", duckdb.STATEMENT_TYPE_DETACH: "DETACH",
	duckdb.STATEMENT_TYPE_MULTI: "several statements",
}

const allowed = "only SELECT, WITH, EXPLAIN, DESCRIBE and SHOW are accepted"

// prepareReadOnly prepares query and returns it only if DuckDB's parse says
// it is one SELECT, or an EXPLAIN of one.
func prepareReadOnly(dc driver.Conn, query string) (*duckdb.Stmt, duckdb.StmtType, error) {
	stmt, typ, err := prepare(dc, query)
	if err != nil {
		return nil, 0, err
	}
	switch typ {
	case duckdb.STATEMENT_TYPE_SELECT, duckdb.STATEMENT_TYPE_EXPLAIN:
		// checkQuery has passed the text; this is a second look by the
		// statement's type.
		return stmt, typ, nil
	}
	stmt.Close()
	return nil, 0, fmt.Errorf("%w: the statement is %s; %s", ErrQueryRefused, nameOf(typ), allowed)
}

func nameOf(t duckdb.StmtType) string {
	if n, ok := statementNames[t]; ok {
		return n
	}
	return fmt.Sprintf("of type %d", t)
}

// prepare has DuckDB parse and bind query, without running it. The driver's
// Prepare (unlike PrepareContext) refuses several statements instead of
// running all but the last.
func prepare(dc driver.Conn, query string) (*duckdb.Stmt, duckdb.StmtType, error) {
	st, err := dc.Prepare(query)
	if err != nil {
		if strings.Contains(err.Error(), "multi-statement") {
			return nil, 0, fmt.Errorf("%w: the query holds several statements; send exactly one", ErrQueryRefused)
		}
		return nil, 0, err
	}
	stmt := st.(*duckdb.Stmt)
	typ, err := stmt.StatementType()
	if err != nil {
		stmt.Close()
		return nil, 0, err
	}
	return stmt, typ, nil
}

// explained returns the statement an EXPLAIN [ANALYZE] [(options)] applies
// to, and whether ANALYZE was asked. The cut need not be right: checkQuery
// checks what it returns as a SELECT and runs EXPLAIN of exactly that, so
// a cut fooled by comments only explains another SELECT.
func explained(q string) (inner string, analyze, ok bool) {
	rest := skipSpace(q)
	word, rest := nextWord(rest)
	if !strings.EqualFold(word, "EXPLAIN") {
		return "", false, false
	}
	rest = skipSpace(rest)
	if w, r := nextWord(rest); strings.EqualFold(w, "ANALYZE") || strings.EqualFold(w, "ANALYSE") {
		rest, analyze = skipSpace(r), true
	}
	if strings.HasPrefix(rest, "(") {
		end := strings.IndexByte(rest, ')')
		if end < 0 {
			return "", false, false
		}
		if strings.Contains(strings.ToUpper(rest[:end]), "ANALY") {
			analyze = true
		}
		rest = rest[end+1:]
	}
	if strings.TrimSpace(rest) == "" {
		return "", false, false
	}
	return rest, analyze, true
}

// skipSpace skips white space and SQL comments.
func skipSpace(s string) string {
	for {
		t := strings.TrimLeft(s, " \t\r\n\f\v")
		switch {
		case strings.HasPrefix(t, "--"):
			if i := strings.IndexByte(t, '\n'); i >= 0 {
				s = t[i+1:]
			} else {
				return ""
			}
		case strings.HasPrefix(t, "/*"):
			if i := strings.Index(t[2:], "*/"); i >= 0 {
				s = t[i+4:]
			} else {
				return ""
			}
		default:
			return t
		}
	}
}

func nextWord(s string) (string, string) {
	i := 0
	for i < len(s) && (s[i] >= 'a' && s[i] <= 'z' || s[i] >= 'A' && s[i] <= 'Z' || s[i] == '_') {
		i++
	}
	return s[:i], s[i:]
}

// columnsOf reads the names and types of the columns a prepared statement
// returns.
func columnsOf(stmt *duckdb.Stmt) ([]resultColumn, error) {
	n, err := stmt.ColumnCount()
	if err != nil {
		return nil, err
	}
	cols := make([]resultColumn, n)
	for i := range cols {
		if cols[i].name, err = stmt.ColumnName(i); err != nil {
			return nil, err
		}
		if cols[i].typ, err = stmt.ColumnType(i); err != nil {
			return nil, err
		}
	}
	return cols, nil
}

// errPastTimeLimit is the cause of a query's context past its time limit.
var errPastTimeLimit = errors.New("past its time limit")

// unreadableType: the driver could not read a value of a column (a type it
// does not support, nested in a list or struct).
type unreadableType struct {
	column string
	err    error
}

func (e *unreadableType) Error() string {
	return fmt.Sprintf("column %q: its values cannot be returned (%v); cast the column to VARCHAR", e.column, e.err)
}

// fetch runs a prepared statement and reads its rows. A bounded
// statement (boundedSelect) carries the limits in its plan: it returns at
// most maxRows+1 rows, each with a last column that is true from the first
// row past maxBytes; fetch stops there or at maxRows rows and says which
// limit cut the result. An EXPLAIN is read up to maxRows rows.
func fetch(ctx context.Context, stmt *duckdb.Stmt, cols []resultColumn, bounded bool, maxRows int, maxBytes int64) (*Result, error) {
	rows, err := stmt.QueryContext(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	n := len(rows.Columns())
	if bounded {
		n--
	}
	res := &Result{Columns: rows.Columns()[:n], Rows: [][]any{}}
	if bounded {
		// The bound statement's columns are expressions; the names are the
		// query's own.
		res.Columns = make([]string, n)
		for i := range res.Columns {
			res.Columns[i] = cols[i].name
		}
	}
	typed, _ := rows.(driver.RowsColumnTypeDatabaseTypeName)
	for i := range n {
		t := ""
		if typed != nil {
			t = typed.ColumnTypeDatabaseTypeName(i)
		}
		res.Types = append(res.Types, t)
	}
	dest := make([]driver.Value, len(rows.Columns()))
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := rows.Next(dest); err != nil {
			if errors.Is(err, io.EOF) {
				return res, nil
			}
			var de *duckdb.Error
			if !errors.As(err, &de) && ctx.Err() == nil && strings.Contains(err.Error(), "unsupported") {
				return nil, &unreadableType{column: unsupportedColumn(err, res.Columns), err: err}
			}
			return nil, err
		}
		if bounded && dest[n] == true {
			res.Truncated = true
			res.TruncatedBy = fmt.Sprintf("the %d-byte limit", maxBytes)
			return res, nil
		}
		if len(res.Rows) == maxRows {
			res.Truncated = true
			res.TruncatedBy = fmt.Sprintf("the %d-row limit", maxRows)
			return res, nil
		}
		out := make([]any, n)
		for i, v := range dest[:n] {
			out[i] = normalize(v, res.Types[i])
		}
		res.Rows = append(res.Rows, out)
	}
}

// unsupportedColumn names the column of the driver's "unsupported data
// type: T: index: N" (N counts from 0), or "?" when it names none.
func unsupportedColumn(err error, columns []string) string {
	msg := err.Error()
	i := strings.LastIndex(msg, "index: ")
	if i < 0 {
		return "?"
	}
	n, convErr := strconv.Atoi(strings.TrimSpace(msg[i+len("index: "):]))
	if convErr != nil || n < 0 || n >= len(columns) {
		return "?"
	}
	return columns[n]
}

// normalize turns the driver's values into the package's: exact decimals,
// JSON as raw text, maps with string keys.
func normalize(v any, typ string) any {
	if typ == "JSON" && v != nil {
		if raw, err := json.Marshal(v); err == nil {
			return json.RawMessage(raw)
		}
	}
	switch x := v.(type) {
	case duckdb.Decimal:
		return Decimal{Unscaled: x.Value, Scale: int32(x.Scale)}
	case duckdb.Interval:
		return fmt.Sprintf("%d months %d days %d microseconds", x.Months, x.Days, x.Micros)
	case duckdb.UUID:
		return x.String()
	case *duckdb.UUID:
		return x.String()
	case duckdb.Map:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[fmt.Sprint(normalize(k, ""))] = normalize(e, "")
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = normalize(e, "")
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalize(e, "")
		}
		return out
	case *big.Int, time.Time:
		return x
	}
	return v
}

// formatValue prints a value for a table or a CSV cell.
func formatValue(v any, typ string) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case []byte:
		return `\x` + hex.EncodeToString(x)
	case json.RawMessage:
		return string(x)
	case time.Time:
		switch typ {
		case "DATE":
			return x.Format("2006-01-02")
		case "TIME":
			return x.Format("15:04:05.999999")
		}
		if strings.HasPrefix(typ, "TIMESTAMP WITH TIME ZONE") || typ == "TIMESTAMPTZ" {
			return x.UTC().Format("2006-01-02 15:04:05.999999Z07:00")
		}
		return x.UTC().Format("2006-01-02 15:04:05.999999")
	case float64:
		return formatFloat(x, 64)
	case float32:
		return formatFloat(float64(x), 32)
	case []any, map[string]any:
		b, err := json.Marshal(jsonValue(x))
		if err != nil {
			return fmt.Sprint(x)
		}
		return string(b)
	}
	return fmt.Sprint(v)
}

// jsonValue turns a value into what encoding/json prints faithfully:
// decimals and huge integers as exact numbers, times as RFC 3339 strings,
// non-finite floats as strings.
func jsonValue(v any) any {
	switch x := v.(type) {
	case Decimal:
		return json.Number(x.String())
	case *big.Int:
		return json.Number(x.String())
	case float64:
		if isFinite(x) {
			return x
		}
		return formatFloat(x, 64)
	case float32:
		if isFinite(float64(x)) {
			return x
		}
		return formatFloat(float64(x), 32)
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = jsonValue(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = jsonValue(e)
		}
		return out
	}
	return v
}
