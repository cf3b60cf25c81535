package infrastore

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// WriteTable prints the result as an aligned text table, numbers to the
// right, NULL spelled out, followed by the row count.
func (r *Result) WriteTable(w io.Writer) error {
	bw := bufio.NewWriter(w)
	cells := make([][]string, len(r.Rows))
	widths := make([]int, len(r.Columns))
	for i, c := range r.Columns {
		widths[i] = utf8.RuneCountInString(c)
	}
	numeric := make([]bool, len(r.Columns))
	for i, t := range r.Types {
		numeric[i] = isNumericType(t)
	}
	for i, row := range r.Rows {
		cells[i] = make([]string, len(row))
		for j, v := range row {
			s := "NULL"
			if v != nil {
				// One line per row: control characters would break the grid.
				s = strings.NewReplacer("\n", `\n`, "\r", `\r`, "\t", `\t`).Replace(formatValue(v, r.Types[j]))
			}
			cells[i][j] = s
			widths[j] = max(widths[j], utf8.RuneCountInString(s))
		}
	}
	line := func(vals []string, right func(int) bool) {
		for j, v := range vals {
			if j > 0 {
				bw.WriteString(" | ")
			}
			pad := strings.Repeat(" ", widths[j]-utf8.RuneCountInString(v))
			if right(j) {
				bw.WriteString(pad + v)
			} else if j == len(vals)-1 {
				bw.WriteString(v) // no trailing blanks
			} else {
				bw.WriteString(v + pad)
			}
		}
		bw.WriteByte('\n')
	}
	line(r.Columns, func(j int) bool { return numeric[j] })
	for j, wd := range widths {
		if j > 0 {
			bw.WriteString("-+-")
		}
		bw.WriteString(strings.Repeat("-", wd))
	}
	bw.WriteByte('\n')
	for _, row := range cells {
		line(row, func(j int) bool { return numeric[j] })
	}
	switch n := len(r.Rows); {
	case r.Truncated:
		fmt.Fprintf(bw, "(%d rows shown; more were dropped)\n", n)
	case n == 1:
		bw.WriteString("(1 row)\n")
	default:
		fmt.Fprintf(bw, "(%d rows)\n", n)
	}
	return bw.Flush()
}

// WriteCSV prints the result as CSV with a header line; NULL is an empty
// field.
func (r *Result) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(r.Columns); err != nil {
		return err
	}
	rec := make([]string, len(r.Columns))
	for _, row := range r.Rows {
		for j, v := range row {
			rec[j] = formatValue(v, r.Types[j])
		}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// WriteJSON prints the result as a JSON array of objects, one per row, keys
// in column order. Decimals and huge integers are exact JSON numbers; times
// are RFC 3339 strings; JSON columns are embedded as JSON.
func (r *Result) WriteJSON(w io.Writer) error {
	bw := bufio.NewWriter(w)
	keys := make([][]byte, len(r.Columns))
	for i, c := range r.Columns {
		k, err := json.Marshal(c)
		if err != nil {
			return err
		}
		keys[i] = k
	}
	bw.WriteByte('[')
	for i, row := range r.Rows {
		if i > 0 {
			bw.WriteByte(',')
		}
		bw.WriteString("\n  {")
		for j, v := range row {
			if j > 0 {
				bw.WriteByte(',')
			}
			bw.Write(keys[j])
			bw.WriteByte(':')
			b, err := marshalJSON(jsonValue(v))
			if err != nil {
				return fmt.Errorf("infrastore: row %d, column %s: %w", i+1, r.Columns[j], err)
			}
			bw.Write(b)
		}
		bw.WriteByte('}')
	}
	if len(r.Rows) > 0 {
		bw.WriteByte('\n')
	}
	bw.WriteString("]\n")
	return bw.Flush()
}

// marshalJSON is json.Marshal without HTML escaping: the output is data,
// not a web page.
func marshalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

func isNumericType(t string) bool {
	switch {
	case strings.HasPrefix(t, "DECIMAL"):
		return true
	}
	switch t {
	case "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER",
		"UBIGINT", "UHUGEINT", "FLOAT", "DOUBLE":
		return true
	}
	return false
}

func isFinite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

func formatFloat(f float64, bits int) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	return strconv.FormatFloat(f, 'g', -1, bits)
}
