package jobfile

import (
	"regexp"
	"strconv"
	"strings"

	yaml3 "gopkg.in/yaml.v3"
)

// locator finds the line a field of the decoded spec was written on.
type locator struct {
	root  *yaml3.Node // YAML and JSON: positions are exact
	lines []string    // Jsonnet: the source, searched for the field's keys
}

func newLocator(format string, data []byte) *locator {
	l := &locator{}
	if format == "jsonnet" {
		l.lines = strings.Split(string(data), "\n")
		return l
	}
	var doc yaml3.Node
	if err := yaml3.Unmarshal(data, &doc); err == nil && len(doc.Content) > 0 {
		l.root = doc.Content[0]
	}
	return l
}

// step is one component of a field path: a key, or an index ([3]).
type step struct {
	key   string
	index int
	isIdx bool
}

var stepRE = regexp.MustCompile(`([^.\[\]]+)|\[([^\]]*)\]`)

func parsePath(field string) []step {
	var out []step
	for _, m := range stepRE.FindAllStringSubmatch(field, -1) {
		if m[1] != "" {
			out = append(out, step{key: m[1]})
			continue
		}
		if i, err := strconv.Atoi(m[2]); err == nil {
			out = append(out, step{key: m[2], index: i, isIdx: true})
		} else {
			out = append(out, step{key: m[2]})
		}
	}
	return out
}

// line returns the 1-based line of field, or 0 when it cannot tell.
func (l *locator) line(field string) int {
	steps := parsePath(field)
	if len(steps) == 0 {
		return 0
	}
	if l.root != nil {
		return l.yamlLine(steps)
	}
	if l.lines != nil {
		return l.sourceLine(steps)
	}
	return 0
}

// yamlLine walks the YAML (or JSON) tree; the line of the deepest node
// found is the answer, so a missing field points at its parent.
func (l *locator) yamlLine(steps []step) int {
	n, line := l.root, 0
	for _, s := range steps {
		for n.Kind == yaml3.AliasNode && n.Alias != nil {
			n = n.Alias
		}
		switch {
		case n.Kind == yaml3.MappingNode:
			found := false
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == s.key {
					line, n, found = n.Content[i].Line, n.Content[i+1], true
					break
				}
			}
			if !found {
				return line
			}
		case n.Kind == yaml3.SequenceNode && s.isIdx && s.index >= 0 && s.index < len(n.Content):
			n = n.Content[s.index]
			line = n.Line
		default:
			return line
		}
	}
	return line
}

// sourceLine searches Jsonnet source for the path's keys in order (each
// after the previous one), falling back to the first occurrence anywhere.
// Jsonnet output carries no positions, so this names the likeliest line.
func (l *locator) sourceLine(steps []step) int {
	line, col, best := 0, 0, 0
	for _, s := range steps {
		if s.isIdx {
			continue
		}
		re := regexp.MustCompile(`(^|[^A-Za-z0-9_])['"]?` + regexp.QuoteMeta(s.key) + `['"]?\s*\+?:`)
		fl, fc, ok := find(l.lines, re, line, col)
		if !ok {
			fl, fc, ok = find(l.lines, re, 0, 0)
		}
		if !ok {
			break
		}
		line, col, best = fl, fc, fl+1
	}
	return best
}

func find(lines []string, re *regexp.Regexp, fromLine, fromCol int) (int, int, bool) {
	for i := fromLine; i < len(lines); i++ {
		text := lines[i]
		off := 0
		if i == fromLine {
			off = min(fromCol, len(text))
		}
		if c := commentStart(text); c >= 0 && c < len(text) {
			text = text[:c]
		}
		if off > len(text) {
			continue
		}
		if loc := re.FindStringIndex(text[off:]); loc != nil {
			return i, off + loc[1], true
		}
	}
	return 0, 0, false
}

// commentStart is where a // or # comment begins (outside strings), or -1.
func commentStart(s string) int {
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == '\\' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '#':
			return i
		case c == '/' && i+1 < len(s) && s[i+1] == '/':
			return i
		}
	}
	return -1
}

var (
	yamlLineRE    = regexp.MustCompile(`line (\d+)`)
	jsonnetLineRE = regexp.MustCompile(`:(\d+):\d+`)
)

// yamlErrorLine picks the line out of a YAML or JSON syntax error.
func yamlErrorLine(err error) int {
	if m := yamlLineRE.FindStringSubmatch(err.Error()); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n
	}
	return 0
}

// jsonnetErrorLine picks the line out of a Jsonnet error that points into
// the file itself; the message already says where, so this is only for the
// Problem's Line.
func jsonnetErrorLine(msg, path string) int {
	i := strings.Index(msg, path+":")
	if i < 0 {
		return 0
	}
	if m := jsonnetLineRE.FindStringSubmatch(msg[i+len(path):]); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n
	}
	return 0
}
