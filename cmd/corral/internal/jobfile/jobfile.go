package jobfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	jsonnet "github.com/google/go-jsonnet"
	"sigs.k8s.io/yaml"

	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/events"
)

// Options control how a file is read.
type Options struct {
	// User is the caller: every job runs as them.
	User string
	// Timeout bounds the evaluation of a Jsonnet file (default 5 s).
	Timeout time.Duration
	// MaxStack bounds Jsonnet's call depth (default 500).
	MaxStack int
	// ExtVars are given to Jsonnet as std.extVar(name). "user" is always
	// set to User.
	ExtVars map[string]string
	// JPaths are folders Jsonnet imports may read besides the job file's
	// own (--jpath); imports resolving anywhere else are refused.
	JPaths []string
}

func (o *Options) defaults() {
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	if o.MaxStack <= 0 {
		o.MaxStack = 500
	}
}

// AllocSet is an alloc set declared by a bundle.
type AllocSet struct {
	Name        string
	Count       int32
	Priority    int32
	Resources   *events.Resources
	Constraints []*events.Constraint
	Labels      map[string]string
}

// File is a job file, read and checked.
type File struct {
	Path      string
	Format    string // jsonnet, yaml or json
	Bundle    bool   // written as {alloc_sets, jobs} rather than one job
	AllocSets []AllocSet
	Jobs      []*events.JobSpec
}

// Problem is one thing wrong with a file.
type Problem struct {
	Line   int    // 1-based; 0 when no line can be named
	Field  string // as written in the file, e.g. jobs[1].resources.memory
	Reason string
}

// Error lists every problem of one file.
type Error struct {
	Path     string
	Problems []Problem
}

func (e *Error) Error() string {
	var b strings.Builder
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Path)
		if p.Line > 0 {
			fmt.Fprintf(&b, ":%d", p.Line)
		}
		b.WriteString(": ")
		if p.Field != "" {
			b.WriteString(p.Field + ": ")
		}
		b.WriteString(p.Reason)
	}
	return b.String()
}

// FormatOf returns the format of a file from its extension.
func FormatOf(path string) (string, error) {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".jsonnet", ".libsonnet":
		return "jsonnet", nil
	case ".yaml", ".yml":
		return "yaml", nil
	case ".json":
		return "json", nil
	}
	return "", fmt.Errorf("%s: unknown extension %q: name the file .jsonnet, .yaml, .yml or .json", path, filepath.Ext(path))
}

// Load reads and checks the job file at path.
func Load(path string, opts Options) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the job file: %w", err)
	}
	return Decode(path, data, opts)
}

// Decode checks a job file's contents; path names it (and, for Jsonnet,
// is where relative imports are found).
func Decode(path string, data []byte, opts Options) (*File, error) {
	opts.defaults()
	format, err := FormatOf(path)
	if err != nil {
		return nil, err
	}
	if len(data) > commands.MaxSpecBytes {
		return nil, &Error{Path: path, Problems: []Problem{{Reason: fmt.Sprintf("the file is %d bytes, more than the %d allowed", len(data), commands.MaxSpecBytes)}}}
	}
	var js []byte
	switch format {
	case "jsonnet":
		out, err := Evaluate(path, data, opts)
		if err != nil {
			return nil, err
		}
		js = out
	default:
		out, err := yaml.YAMLToJSON(data)
		if err != nil {
			return nil, &Error{Path: path, Problems: []Problem{{Line: yamlErrorLine(err), Reason: "not valid " + strings.ToUpper(format) + ": " + err.Error()}}}
		}
		js = out
	}
	f := &File{Path: path, Format: format}
	loc := newLocator(format, data)
	if probs := duplicateKeys(loc.root); len(probs) > 0 {
		return nil, &Error{Path: path, Problems: probs}
	}
	if probs := f.decode(js, opts.User); len(probs) > 0 {
		for i := range probs {
			probs[i].Line = loc.line(probs[i].Field)
		}
		return nil, &Error{Path: path, Problems: probs}
	}
	return f, nil
}

// Evaluate runs a Jsonnet program and returns its JSON output. It stops the
// program past opts.Timeout.
func Evaluate(path string, data []byte, opts Options) ([]byte, error) {
	opts.defaults()
	if d := jsonnetDepth(data); d > MaxJsonnetDepth {
		// go-jsonnet's parser recurses once a bracket: deep enough, it
		// overflows the stack and the process dies before any limit holds.
		return nil, &Error{Path: path, Problems: []Problem{{Reason: fmt.Sprintf("brackets nested %d deep, more than the %d allowed", d, MaxJsonnetDepth)}}}
	}
	vm := jsonnet.MakeVM()
	vm.MaxStack = opts.MaxStack
	vm.Importer(newConfinedImporter(path, opts.JPaths))
	vm.ExtVar("user", opts.User)
	for k, v := range opts.ExtVars {
		if k != "user" {
			vm.ExtVar(k, v)
		}
	}
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := vm.EvaluateAnonymousSnippet(path, string(data))
		done <- result{out, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			return nil, &Error{Path: path, Problems: []Problem{{Line: jsonnetErrorLine(r.err.Error(), path), Reason: "Jsonnet: " + strings.TrimSpace(r.err.Error())}}}
		}
		if len(r.out) > commands.MaxSpecBytes {
			return nil, &Error{Path: path, Problems: []Problem{{Reason: fmt.Sprintf("evaluates to %d bytes, more than the %d allowed", len(r.out), commands.MaxSpecBytes)}}}
		}
		return []byte(r.out), nil
	case <-time.After(opts.Timeout):
		// The evaluation cannot be interrupted; it is abandoned and the
		// command exits soon after.
		return nil, &Error{Path: path, Problems: []Problem{{Reason: fmt.Sprintf("Jsonnet evaluation took longer than %s: look for unbounded recursion", opts.Timeout)}}}
	}
}

var (
	bundleKeys   = []string{"alloc_sets", "jobs"}
	allocSetKeys = []string{"name", "count", "priority", "resources", "constraints", "labels"}
)

// decode fills f from the evaluated JSON and returns every problem.
func (f *File) decode(js []byte, user string) []Problem {
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	var root any
	if err := dec.Decode(&root); err != nil {
		return []Problem{{Reason: "not JSON: " + err.Error()}}
	}
	obj, ok := root.(map[string]any)
	if !ok {
		return []Problem{{Reason: "the file must be one job (an object with name, command, ...) or a bundle {alloc_sets: [...], jobs: [...]}"}}
	}
	if _, isBundle := obj["jobs"]; !isBundle {
		spec, probs := decodeJob("", root, user)
		if spec != nil {
			f.Jobs = []*events.JobSpec{spec}
		}
		return probs
	}
	f.Bundle = true
	var probs []Problem
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		if !slices.Contains(bundleKeys, k) {
			probs = append(probs, Problem{Field: k, Reason: "unknown field of a bundle; a bundle has only alloc_sets and jobs (put job fields inside jobs[...])"})
		}
	}
	jobs, ok := obj["jobs"].([]any)
	if !ok || len(jobs) == 0 {
		probs = append(probs, Problem{Field: "jobs", Reason: "must be a non-empty list of jobs"})
	}
	specs, ps := decodeEach("jobs", jobs, user, decodeJob, func(s *events.JobSpec) string { return s.Name })
	probs = append(probs, ps...)
	f.Jobs = append(f.Jobs, specs...)
	if v, ok := obj["alloc_sets"]; ok {
		sets, isList := v.([]any)
		if !isList {
			probs = append(probs, Problem{Field: "alloc_sets", Reason: "must be a list of alloc sets"})
		}
		decoded, ps := decodeEach("alloc_sets", sets, user, decodeAllocSet, func(a *AllocSet) string { return a.Name })
		probs = append(probs, ps...)
		for _, a := range decoded {
			f.AllocSets = append(f.AllocSets, *a)
		}
	}
	// A job naming an alloc set the bundle does not declare is most likely
	// a typo when the bundle declares some.
	declared := declaredNames(obj["alloc_sets"])
	for i, j := range jobs {
		m, _ := j.(map[string]any)
		name, _ := m["alloc_set"].(string)
		if name != "" && len(declared) > 0 && !slices.Contains(declared, name) {
			probs = append(probs, Problem{Field: fmt.Sprintf("jobs[%d].alloc_set", i),
				Reason: fmt.Sprintf("%q is not one of this file's alloc_sets (%s)", name, strings.Join(declared, ", "))})
		}
	}
	return probs
}

func declaredNames(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, s := range l {
		m, _ := s.(map[string]any)
		if n, ok := m["name"].(string); ok {
			out = append(out, n)
		}
	}
	return out
}

// decodeEach decodes each item of the bundle's list field with decode,
// and reports a name (as name reads it) that an earlier item has too.
func decodeEach[T any](field string, items []any, user string, decode func(prefix string, v any, user string) (*T, []Problem), name func(*T) string) ([]*T, []Problem) {
	var out []*T
	var probs []Problem
	seen := map[string]int{}
	for i, item := range items {
		p := fmt.Sprintf("%s[%d]", field, i)
		x, ps := decode(p, item, user)
		probs = append(probs, ps...)
		if x == nil {
			continue
		}
		if prev, dup := seen[name(x)]; dup {
			probs = append(probs, Problem{Field: p + ".name", Reason: fmt.Sprintf("%q is also the name of %s[%d]", name(x), field, prev)})
		}
		seen[name(x)] = i
		out = append(out, x)
	}
	return out, probs
}

// decodeJob decodes one job spec; fields are reported under prefix.
func decodeJob(prefix string, v any, user string) (*events.JobSpec, []Problem) {
	js, err := json.Marshal(v)
	if err != nil {
		return nil, []Problem{{Field: prefix, Reason: err.Error()}}
	}
	spec, err := commands.DecodeSpecJSON(js, user)
	if err != nil {
		return nil, problems(prefix, err)
	}
	return spec, nil
}

// decodeAllocSet decodes an alloc set with the job decoder, which reads the
// same fields the same way (quantities, bands, constraints, labels).
func decodeAllocSet(prefix string, v any, user string) (*AllocSet, []Problem) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, []Problem{{Field: prefix, Reason: "must be an object with name, count, resources, ..."}}
	}
	var probs []Problem
	fake := map[string]any{"command": "alloc"}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !slices.Contains(allocSetKeys, k) {
			probs = append(probs, Problem{Field: join(prefix, k), Reason: "unknown field; known fields here: " + strings.Join(allocSetKeys, ", ")})
			continue
		}
		fake[k] = m[k]
	}
	if _, ok := m["count"]; !ok {
		fake["count"] = json.Number("1")
	}
	spec, ps := decodeJob(prefix, fake, user)
	probs = append(probs, ps...)
	if spec == nil || len(probs) > 0 {
		return nil, probs
	}
	return &AllocSet{Name: spec.Name, Count: spec.TaskCount, Priority: spec.Priority, Resources: spec.Resources,
		Constraints: spec.Constraints, Labels: spec.Labels}, nil
}

// problems turns a decoding error into problems with prefixed fields.
func problems(prefix string, err error) []Problem {
	var ce *commands.Error
	if !errors.As(err, &ce) {
		return []Problem{{Field: prefix, Reason: err.Error()}}
	}
	if len(ce.Details) == 0 {
		return []Problem{{Field: join(prefix, ce.Field), Reason: ce.Msg}}
	}
	out := make([]Problem, len(ce.Details))
	for i, d := range ce.Details {
		out[i] = Problem{Field: join(prefix, d.Field), Reason: d.Reason}
	}
	return out
}

func join(prefix, field string) string {
	switch {
	case prefix == "":
		return field
	case field == "":
		return prefix
	}
	return prefix + "." + field
}

// MaxJsonnetDepth bounds how deeply a Jsonnet program's brackets ([, {, ()
// may nest; deeper programs are refused before they are parsed.
const MaxJsonnetDepth = 1000

// jsonnetDepth is the deepest nesting of brackets in a Jsonnet program,
// outside strings, text blocks and comments, as far as it can tell without
// parsing: it stops counting past MaxJsonnetDepth.
func jsonnetDepth(src []byte) int {
	depth, deepest := 0, 0
	for i := 0; i < len(src); i++ {
		switch c := src[i]; c {
		case '[', '{', '(':
			depth++
			if depth > deepest {
				deepest = depth
				if deepest > MaxJsonnetDepth {
					return deepest
				}
			}
		case ']', '}', ')':
			if depth > 0 {
				depth--
			}
		case '#':
			i = skipTo(src, i+1, "\n")
		case '/':
			if i+1 < len(src) && src[i+1] == '/' {
				i = skipTo(src, i+2, "\n")
			} else if i+1 < len(src) && src[i+1] == '*' {
				i = skipTo(src, i+2, "*/")
			}
		case '|':
			if bytes.HasPrefix(src[i:], []byte("|||")) {
				i = skipTo(src, i+3, "|||")
			}
		case '"', '\'':
			for i++; i < len(src) && src[i] != c; i++ {
				if src[i] == '\\' {
					i++
				}
			}
		}
	}
	return deepest
}

// skipTo returns the index of the last byte of the first end at or after
// i, or the end of src.
func skipTo(src []byte, i int, end string) int {
	if i > len(src) {
		return len(src)
	}
	j := bytes.Index(src[i:], []byte(end))
	if j < 0 {
		return len(src)
	}
	return i + j + len(end) - 1
}
