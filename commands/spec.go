package commands

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// MaxSpecBytes bounds a spec file.
const MaxSpecBytes = 1 << 20

// DecodeSpecJSON reads a job spec written in JSON (the CLI turns its
// Jsonnet and YAML files into JSON first), checks it, and returns it with
// User set to user, the caller's identity. Every problem is reported at
// once in an *Error with Details, each naming its field as written in the
// file (`tasks[3].resources.memory: must be > 0`).
//
// The file's friendlier forms: priority as a band name (monitoring,
// production, batch, best-effort) or an integer 0-11; cpu and gpu as "500m"
// or cores (0.5); memory and disk as "2GiB", "512Mi", "1G" or bytes;
// durations as "10s" or milliseconds; constraints with an op of
// scheduler.Ops, soft or hard; per-task overrides under tasks, keyed by
// index.
func DecodeSpecJSON(data []byte, user string) (*events.JobSpec, error) {
	if len(data) > MaxSpecBytes {
		return nil, invalid("", "the spec is %d bytes, more than the %d allowed", len(data), MaxSpecBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var root any
	if err := dec.Decode(&root); err != nil {
		return nil, invalid("", "not JSON: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, invalid("", "not JSON: data after the spec")
	}
	d := &specDecoder{bad: map[string]bool{}}
	spec := d.spec(root, user)
	// A field that could not be read is reported once, by the decoder,
	// not again by validation of the value left in its place.
	for _, v := range validateSpec(spec) {
		if !d.covered(v.Field) {
			d.errs = append(d.errs, v)
		}
	}
	if err := d.errs.err(); err != nil {
		return nil, err
	}
	return spec, nil
}

type specDecoder struct {
	errs violations
	bad  map[string]bool
}

func (d *specDecoder) fail(path, format string, args ...any) {
	d.errs.add(path, format, args...)
	d.bad[path] = true
}

// covered reports whether path or one of its parents failed to decode.
func (d *specDecoder) covered(path string) bool {
	for p := path; ; {
		if d.bad[p] {
			return true
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			return false
		}
		p = p[:i]
	}
}

func join(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}

func index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// object returns v's fields, refusing the ones not in known.
func (d *specDecoder) object(path string, v any, known ...string) map[string]any {
	m, ok := v.(map[string]any)
	if !ok {
		d.fail(path, "must be an object (key: value pairs), not %s", kindOf(v))
		return nil
	}
	for _, k := range sortedKeys(m) {
		if !slices.Contains(known, k) {
			d.fail(join(path, k), "unknown field; known fields here: %s", strings.Join(known, ", "))
		}
	}
	return m
}

func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

func (d *specDecoder) str(path string, v any) string {
	s, ok := v.(string)
	if !ok {
		d.fail(path, "must be a string, not %s", kindOf(v))
	}
	return s
}

// text accepts a string, number or boolean as text: YAML turns `PORT: 8080`
// into a number, and env values and labels are strings.
func (d *specDecoder) text(path string, v any) string {
	switch x := v.(type) {
	case string:
		return x
	case json.Number:
		return x.String()
	case bool:
		return strconv.FormatBool(x)
	}
	d.fail(path, "must be a string, not %s", kindOf(v))
	return ""
}

func (d *specDecoder) integer(path string, v any) int64 {
	n, ok := v.(json.Number)
	if !ok {
		if s, isStr := v.(string); isStr {
			if i, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64); err == nil {
				return i
			}
		}
		d.fail(path, "must be a whole number, not %s", kindOf(v))
		return 0
	}
	i, err := strconv.ParseInt(n.String(), 10, 64)
	if err != nil {
		d.fail(path, "must be a whole number, not %s", n)
		return 0
	}
	return i
}

func (d *specDecoder) int32(path string, v any) int32 {
	i := d.integer(path, v)
	if i > 1<<31-1 || i < -(1<<31) {
		d.fail(path, "%d is out of range", i)
		return 0
	}
	return int32(i)
}

func (d *specDecoder) boolean(path string, v any) bool {
	b, ok := v.(bool)
	if !ok {
		d.fail(path, "must be true or false, not %s", kindOf(v))
	}
	return b
}

func (d *specDecoder) strList(path string, v any) []string {
	l, ok := v.([]any)
	if !ok {
		d.fail(path, "must be a list of strings, not %s", kindOf(v))
		return nil
	}
	out := make([]string, len(l))
	for i, x := range l {
		out[i] = d.text(index(path, i), x)
	}
	return out
}

func (d *specDecoder) strMap(path string, v any) map[string]string {
	m, ok := v.(map[string]any)
	if !ok {
		d.fail(path, "must be an object of key: value pairs, not %s", kindOf(v))
		return nil
	}
	out := make(map[string]string, len(m))
	for _, k := range sortedKeys(m) {
		x := m[k]
		out[k] = d.text(join(path, k), x)
	}
	return out
}

func (d *specDecoder) milli(path string, v any) int64 {
	return d.quantity(path, v, `millicores like "500m" or cores like 0.5`, ParseMilli)
}

func (d *specDecoder) bytes(path string, v any) int64 {
	return d.quantity(path, v, `bytes or a quantity like "2GiB"`, ParseBytes)
}

func (d *specDecoder) duration(path string, v any) int64 {
	return d.quantity(path, v, `a duration like "10s"`, ParseDurationMS)
}

// quantity reads a number or a string with units through parse; want says
// what the field takes when v is neither.
func (d *specDecoder) quantity(path string, v any, want string, parse func(string) (int64, error)) int64 {
	var s string
	switch x := v.(type) {
	case json.Number:
		s = x.String()
	case string:
		s = x
	default:
		d.fail(path, "must be %s, not %s", want, kindOf(v))
		return 0
	}
	n, err := parse(s)
	if err != nil {
		d.fail(path, "%v", err)
	}
	return n
}

var specFields = []string{"name", "user", "priority", "count", "labels", "command", "args", "env", "resources",
	"port_names", "constraints", "tasks", "restart", "health_check", "update", "start_after", "alloc_set", "spread", "distinct_hosts",
	"appclass", "secret_env", "package", "kill_timeout"}

func (d *specDecoder) spec(root any, user string) *events.JobSpec {
	spec := &events.JobSpec{User: user}
	m := d.object("", root, specFields...)
	portsSet := false
	for _, k := range specFields {
		v, ok := m[k]
		if !ok {
			continue
		}
		switch k {
		case "name":
			spec.Name = d.str(k, v)
		case "user":
			if u := d.str(k, v); u != user {
				d.fail(k, "the job runs as the caller, %s; remove user from the spec (it says %q)", user, u)
			}
		case "priority":
			spec.Priority = d.priority(k, v)
		case "count":
			spec.TaskCount = d.int32(k, v)
		case "labels":
			spec.Labels = d.strMap(k, v)
		case "command":
			spec.Command = d.str(k, v)
		case "args":
			spec.Args = d.strList(k, v)
		case "env":
			spec.Env = d.strMap(k, v)
		case "resources":
			spec.Resources, portsSet = d.resources(k, v)
		case "port_names":
			spec.PortNames = d.strList(k, v)
		case "constraints":
			spec.Constraints = d.constraints(k, v)
		case "tasks":
			spec.Overrides = d.overrides(k, v)
		case "restart":
			spec.Restart = d.restart(k, v)
		case "health_check":
			spec.HealthCheck = d.healthCheck(k, v)
		case "update":
			spec.Update = d.updatePolicy(k, v)
		case "start_after":
			spec.StartAfter = d.str(k, v)
		case "spread":
			// "none" opts out of spreading by default; a list names the
			// failure domains to spread evenly across.
			if s, ok := v.(string); ok && s == "none" {
				spec.Pack = true
			} else if ok {
				d.fail(k, `must be "none" or a list of machine attributes, not %q`, s)
			} else {
				spec.Spread = d.strList(k, v)
			}
		case "distinct_hosts":
			spec.DistinctHosts = d.boolean(k, v)
		case "alloc_set":
			spec.AllocSet = d.str(k, v)
		case "appclass":
			spec.Appclass = d.str(k, v)
		case "secret_env":
			spec.SecretEnv = d.strList(k, v)
		case "package":
			spec.Package = d.str(k, v)
		case "kill_timeout":
			spec.KillTimeoutMs = d.duration(k, v)
		}
	}
	// Naming ports asks for them.
	if !portsSet && len(spec.PortNames) > 0 {
		if spec.Resources == nil {
			spec.Resources = &events.Resources{}
		}
		spec.Resources.Ports = int32(len(spec.PortNames))
	}
	return spec
}

func (d *specDecoder) priority(path string, v any) int32 {
	if s, ok := v.(string); ok {
		if b, ok := projections.ParseBand(s); ok {
			return b.DefaultPriority()
		}
		if i, err := strconv.Atoi(strings.TrimSpace(s)); err == nil {
			return int32(max(min(i, 1<<20), -1))
		}
		d.fail(path, "%q is neither a band (monitoring, production, batch, best-effort) nor a priority 0-%d", s, projections.MaxPriority)
		return 0
	}
	if _, ok := v.(json.Number); !ok {
		d.fail(path, "must be a band name or a priority 0-%d, not %s", projections.MaxPriority, kindOf(v))
		return 0
	}
	return d.int32(path, v)
}

// resources reads a resource vector and reports whether ports were given.
func (d *specDecoder) resources(path string, v any) (*events.Resources, bool) {
	m := d.object(path, v, "cpu", "memory", "disk", "ports", "gpu")
	r := &events.Resources{}
	_, ports := m["ports"]
	for _, k := range sortedKeys(m) {
		x := m[k]
		switch k {
		case "cpu":
			r.CpuMilli = d.milli(join(path, k), x)
		case "gpu":
			r.GpuMilli = d.milli(join(path, k), x)
		case "memory":
			r.MemoryBytes = d.bytes(join(path, k), x)
		case "disk":
			r.DiskBytes = d.bytes(join(path, k), x)
		case "ports":
			r.Ports = d.int32(join(path, k), x)
		}
	}
	return r, ports
}

func (d *specDecoder) constraints(path string, v any) []*events.Constraint {
	l, ok := v.([]any)
	if !ok {
		d.fail(path, "must be a list of constraints, not %s", kindOf(v))
		return nil
	}
	out := make([]*events.Constraint, len(l))
	for i, x := range l {
		p := index(path, i)
		m := d.object(p, x, "attribute", "op", "value", "values", "soft", "hard")
		c := &events.Constraint{}
		if a, ok := m["attribute"]; ok {
			c.Attribute = d.str(join(p, "attribute"), a)
		}
		if val, ok := m["value"]; ok {
			c.Values = []string{d.text(join(p, "value"), val)}
		}
		if vals, ok := m["values"]; ok {
			if _, both := m["value"]; both {
				d.fail(join(p, "values"), "give value or values, not both")
			}
			c.Values = d.strList(join(p, "values"), vals)
		}
		if op, ok := m["op"]; ok {
			c.Op = d.str(join(p, "op"), op)
		} else if len(c.Values) > 0 {
			c.Op = "="
		}
		soft, hasSoft := m["soft"]
		hard, hasHard := m["hard"]
		if hasSoft {
			c.Soft = d.boolean(join(p, "soft"), soft)
		}
		if hasHard {
			h := d.boolean(join(p, "hard"), hard)
			if hasSoft && h == c.Soft {
				d.fail(join(p, "hard"), "contradicts soft")
			}
			c.Soft = !h
		}
		out[i] = c
	}
	return out
}

func (d *specDecoder) overrides(path string, v any) map[int32]*events.TaskOverride {
	m, ok := v.(map[string]any)
	if !ok {
		d.fail(path, "must be an object keyed by task index, like {\"3\": {args: [...]}}, not %s", kindOf(v))
		return nil
	}
	out := make(map[int32]*events.TaskOverride, len(m))
	for _, k := range sortedKeys(m) {
		x := m[k]
		idx, err := strconv.ParseInt(strings.TrimSpace(k), 10, 32)
		if err != nil || idx < 0 {
			d.fail(path+"["+k+"]", "the key must be a task index (0, 1, ...)")
			continue
		}
		p := index(path, int(idx))
		o := d.object(p, x, "args", "env", "resources")
		ov := &events.TaskOverride{}
		if a, ok := o["args"]; ok {
			ov.Args = d.strList(join(p, "args"), a)
		}
		if e, ok := o["env"]; ok {
			ov.Env = d.strMap(join(p, "env"), e)
		}
		if r, ok := o["resources"]; ok {
			ov.Resources, _ = d.resources(join(p, "resources"), r)
		}
		out[int32(idx)] = ov
	}
	return out
}

func (d *specDecoder) restart(path string, v any) *events.RestartPolicy {
	m := d.object(path, v, "mode", "max_restarts", "backoff", "max_backoff")
	r := &events.RestartPolicy{}
	for _, k := range sortedKeys(m) {
		x := m[k]
		switch k {
		case "mode":
			r.Mode = d.str(join(path, k), x)
		case "max_restarts":
			r.MaxRestarts = d.int32(join(path, k), x)
		case "backoff":
			r.BackoffInitialMs = d.duration(join(path, k), x)
		case "max_backoff":
			r.BackoffMaxMs = d.duration(join(path, k), x)
		}
	}
	return r
}

func (d *specDecoder) healthCheck(path string, v any) *events.HealthCheck {
	m := d.object(path, v, "path", "port", "period", "timeout", "failures_allowed")
	h := &events.HealthCheck{}
	for _, k := range sortedKeys(m) {
		x := m[k]
		switch k {
		case "path":
			h.Path = d.str(join(path, k), x)
		case "port":
			h.PortName = d.str(join(path, k), x)
		case "period":
			h.PeriodMs = d.duration(join(path, k), x)
		case "timeout":
			h.TimeoutMs = d.duration(join(path, k), x)
		case "failures_allowed":
			h.FailuresAllowed = d.int32(join(path, k), x)
		}
	}
	return h
}

func (d *specDecoder) updatePolicy(path string, v any) *events.UpdatePolicy {
	m := d.object(path, v, "max_disruptions", "min_healthy_time", "progress_deadline", "auto_revert", "auto_commit", "canary")
	u := &events.UpdatePolicy{}
	for _, k := range sortedKeys(m) {
		x := m[k]
		switch k {
		case "max_disruptions":
			u.MaxDisruptions = d.int32(join(path, k), x)
		case "min_healthy_time":
			u.MinHealthyTimeMs = d.duration(join(path, k), x)
		case "progress_deadline":
			u.ProgressDeadlineMs = d.duration(join(path, k), x)
		case "auto_revert":
			b := d.boolean(join(path, k), x)
			u.AutoRevert = &b
		case "auto_commit":
			b := d.boolean(join(path, k), x)
			u.AutoCommit = &b
		case "canary":
			u.Canary = d.int32(join(path, k), x)
		}
	}
	return u
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
