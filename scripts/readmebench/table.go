package main

import (
	"errors"
	"regexp"
	"strings"
)

// Row is one row of the Performance table: the figure it measures and the
// commands that measure it (a row whose command is "same" as the row above
// has none of its own).
type Row struct {
	Figure   string
	Commands []string
}

// A code span in the command column is a command when it runs something:
// go or make, optionally after a cd or environment assignments.
var commandSpan = regexp.MustCompile(`^(cd \S+ && )?([A-Z_][A-Z0-9_]*=\S+ )*(go|make) `)

// PerformanceRows returns the rows of the first table under the README's
// "## Performance" heading, each with the commands of its last column, a
// command that stands in several rows kept only the first time.
func PerformanceRows(readme string) ([]Row, error) {
	_, section, ok := strings.Cut(readme, "\n## Performance\n")
	if !ok {
		return nil, errors.New(`no "## Performance" section`)
	}
	if next := strings.Index(section, "\n## "); next >= 0 {
		section = section[:next]
	}
	var rows []Row
	seen := map[string]bool{}
	inTable := false
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "|") {
			if inTable {
				break
			}
			continue
		}
		inTable = true
		cells := splitCells(line)
		if len(cells) < 2 || cells[0] == "figure" || strings.Trim(cells[0], "- ") == "" {
			continue
		}
		row := Row{Figure: cells[0]}
		for _, span := range codeSpans(cells[len(cells)-1]) {
			if commandSpan.MatchString(span) && !seen[span] {
				seen[span] = true
				row.Commands = append(row.Commands, span)
			}
		}
		rows = append(rows, row)
	}
	if len(rows) == 0 {
		return nil, errors.New("the Performance section has no table")
	}
	return rows, nil
}

// splitCells splits a table line at the pipes that are not escaped (`\|`
// is a pipe inside a cell, as Markdown renders it).
func splitCells(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimPrefix(line, "|")
	line = strings.TrimSuffix(line, "|")
	var cells []string
	var cell strings.Builder
	for i := 0; i < len(line); i++ {
		switch {
		case line[i] == '\\' && i+1 < len(line) && line[i+1] == '|':
			cell.WriteByte('|')
			i++
		case line[i] == '|':
			cells = append(cells, strings.TrimSpace(cell.String()))
			cell.Reset()
		default:
			cell.WriteByte(line[i])
		}
	}
	return append(cells, strings.TrimSpace(cell.String()))
}

// codeSpans returns the text of each `code span` in a cell.
func codeSpans(cell string) []string {
	var spans []string
	for {
		start := strings.IndexByte(cell, '`')
		if start < 0 {
			return spans
		}
		end := strings.IndexByte(cell[start+1:], '`')
		if end < 0 {
			return spans
		}
		spans = append(spans, cell[start+1:start+1+end])
		cell = cell[start+1+end+1:]
	}
}
