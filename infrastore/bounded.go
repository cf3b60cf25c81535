package infrastore

import (
	"fmt"
	"strconv"
	"strings"

	duckdb "github.com/duckdb/duckdb-go/v2"
)

// The limits of a query's result are part of the statement DuckDB runs,
// not a check of a result already built: the driver (duckdb-go) executes
// every query to a materialized result before the first row can be read,
// so a limit applied while reading comes after the whole result is in
// memory. boundedSelect puts them in the plan instead.

// resultColumn is a column of a checked SELECT, as DuckDB bound it.
type resultColumn struct {
	name string
	typ  duckdb.Type
}

// readableTypes are the column types the driver can read. A column of
// another type (BIT, BIGNUM, TIME_NS) is returned as its text.
var readableTypes = map[duckdb.Type]bool{
	duckdb.TYPE_BOOLEAN: true, duckdb.TYPE_TINYINT: true, duckdb.TYPE_SMALLINT: true, duckdb.TYPE_INTEGER: true,
	duckdb.TYPE_BIGINT: true, duckdb.TYPE_UTINYINT: true, duckdb.TYPE_USMALLINT: true, duckdb.TYPE_UINTEGER: true,
	duckdb.TYPE_UBIGINT: true, duckdb.TYPE_FLOAT: true, duckdb.TYPE_DOUBLE: true, duckdb.TYPE_TIMESTAMP: true,
	duckdb.TYPE_TIMESTAMP_S: true, duckdb.TYPE_TIMESTAMP_MS: true, duckdb.TYPE_TIMESTAMP_NS: true,
	duckdb.TYPE_TIMESTAMP_TZ: true, duckdb.TYPE_DATE: true, duckdb.TYPE_TIME: true, duckdb.TYPE_TIME_TZ: true,
	duckdb.TYPE_INTERVAL: true, duckdb.TYPE_HUGEINT: true, duckdb.TYPE_UHUGEINT: true, duckdb.TYPE_VARCHAR: true,
	duckdb.TYPE_BLOB: true, duckdb.TYPE_DECIMAL: true, duckdb.TYPE_ENUM: true, duckdb.TYPE_LIST: true,
	duckdb.TYPE_STRUCT: true, duckdb.TYPE_MAP: true, duckdb.TYPE_ARRAY: true, duckdb.TYPE_UNION: true,
	duckdb.TYPE_UUID: true, duckdb.TYPE_SQLNULL: true,
}

// valueSizeSQL is the SQL expression of the bytes the value in column
// ref counts for: its bytes plus 8 for strings and blobs, its text's plus
// 8 for nested and other variable-width types, 16 for fixed-width ones, 1
// for NULL. Strings are measured where they are, not copied.
func valueSizeSQL(ref string, t duckdb.Type) string {
	switch t {
	case duckdb.TYPE_VARCHAR:
		return "coalesce(strlen(" + ref + "::VARCHAR) + 8, 1)"
	case duckdb.TYPE_BLOB:
		return "coalesce(octet_length(" + ref + ") + 8, 1)"
	case duckdb.TYPE_SQLNULL:
		return "1"
	case duckdb.TYPE_LIST, duckdb.TYPE_STRUCT, duckdb.TYPE_MAP, duckdb.TYPE_ARRAY, duckdb.TYPE_UNION, duckdb.TYPE_ENUM:
		return "coalesce(strlen(" + ref + "::VARCHAR) + 8, 1)"
	}
	if readableTypes[t] {
		return "16"
	}
	return "coalesce(strlen(" + ref + "::VARCHAR) + 8, 1)"
}

// boundedSelect is the statement that runs for the checked SELECT text:
// the text as a subquery; a running total of its rows' bytes (a streaming
// window, which holds nothing back); every column of a row past maxBytes
// replaced by NULL and the row flagged in a last column; and LIMIT
// maxRows+1. So DuckDB stops the query after maxRows+1 rows, and the result
// it builds holds at most maxBytes bytes of values and maxRows+1 rows, however
// many the query would return. A column of a type the driver cannot read
// is returned as text.
func boundedSelect(text string, cols []resultColumn, maxRows int, maxBytes int64) string {
	var sizes, out []string
	cut := "#" + strconv.Itoa(len(cols)+1)
	for i, c := range cols {
		ref := "#" + strconv.Itoa(i+1)
		sizes = append(sizes, valueSizeSQL(ref, c.typ))
		v := ref
		if !readableTypes[c.typ] {
			v += "::VARCHAR"
		}
		out = append(out, "CASE WHEN NOT "+cut+" THEN "+v+" END")
	}
	return fmt.Sprintf("SELECT %s, %s FROM (SELECT *, sum(%s) OVER (ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) > %d FROM (\n%s\n)) LIMIT %d",
		strings.Join(out, ", "), cut, strings.Join(sizes, " + "), maxBytes, withoutTerminator(text), maxRows+1)
}

// withoutTerminator drops what follows the statement's last token: white
// space, comments and the ';' that may end it, so that the statement can be
// a subquery. Quotes ('...', E'...', "...", $tag$...$tag$) and nested
// block comments are followed so that nothing inside them counts.
func withoutTerminator(q string) string {
	end := 0 // just past the last byte of the statement's last token
	for i := 0; i < len(q); {
		c := q[i]
		switch {
		case c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v' || c == ';':
			i++
		case strings.HasPrefix(q[i:], "--"):
			if j := strings.IndexByte(q[i:], '\n'); j >= 0 {
				i += j + 1
			} else {
				i = len(q)
			}
		case strings.HasPrefix(q[i:], "/*"):
			depth, j := 1, i+2
			for j < len(q) && depth > 0 {
				switch {
				case strings.HasPrefix(q[j:], "/*"):
					depth, j = depth+1, j+2
				case strings.HasPrefix(q[j:], "*/"):
					depth, j = depth-1, j+2
				default:
					j++
				}
			}
			i = j
		case c == '\'' || c == '"':
			escapes := c == '\'' && i > 0 && (q[i-1] == 'E' || q[i-1] == 'e')
			j := i + 1
			for j < len(q) {
				if escapes && q[j] == '\\' {
					j += 2
					continue
				}
				if q[j] == c {
					if j+1 < len(q) && q[j+1] == c {
						j += 2
						continue
					}
					break
				}
				j++
			}
			i = min(j+1, len(q))
			end = i
		case c == '$':
			tag := dollarTag(q[i:])
			if tag == "" {
				i++
				end = i
				continue
			}
			if j := strings.Index(q[i+len(tag):], tag); j >= 0 {
				i += len(tag) + j + len(tag)
			} else {
				i = len(q)
			}
			end = i
		default:
			i++
			end = i
		}
	}
	return q[:end]
}

// dollarTag returns the $tag$ that opens a dollar-quoted string at the
// start of s, or "" when s does not start one ($1 is a parameter).
func dollarTag(s string) string {
	for j := 1; j < len(s); j++ {
		c := s[j]
		switch {
		case c == '$':
			return s[:j+1]
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80 || j > 1 && c >= '0' && c <= '9':
		default:
			return ""
		}
	}
	return ""
}
