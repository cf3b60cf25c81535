package jobfile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	yaml3 "gopkg.in/yaml.v3"

	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
	"github.com/corralhq/corral/scheduler"
)

// kv is one field of an ordered object.
type kv struct {
	k string
	v any
}

// obj is an object whose fields print in the order given.
type obj []kv

func (o *obj) add(k string, v any) { *o = append(*o, kv{k, v}) }

func (o obj) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(f.k)
		b.Write(k)
		b.WriteByte(':')
		v, err := json.Marshal(f.v)
		if err != nil {
			return nil, err
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// Render prints the file as it resolved, in format "json" or "yaml": one job
// as a job spec, a bundle as {alloc_sets, jobs}. The output is a job file
// itself: Load reads it back to the same specs.
func (f *File) Render(format string) ([]byte, error) {
	var v any
	if f.Bundle {
		b := obj{}
		if len(f.AllocSets) > 0 {
			sets := make([]any, len(f.AllocSets))
			for i, a := range f.AllocSets {
				sets[i] = allocSetObj(a)
			}
			b.add("alloc_sets", sets)
		}
		jobs := make([]any, len(f.Jobs))
		for i, j := range f.Jobs {
			jobs[i] = SpecObject(j)
		}
		b.add("jobs", jobs)
		v = b
	} else {
		v = SpecObject(f.Jobs[0])
	}
	return Marshal(v, format)
}

// Marshal prints a value built of obj, []any and scalars as indented JSON
// or as YAML, keeping the order of fields.
func Marshal(v any, format string) ([]byte, error) {
	switch format {
	case "json", "":
		out, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return nil, err
		}
		return append(out, '\n'), nil
	case "yaml":
		var b bytes.Buffer
		enc := yaml3.NewEncoder(&b)
		enc.SetIndent(2)
		if err := enc.Encode(yamlNode(v)); err != nil {
			return nil, err
		}
		return b.Bytes(), nil
	}
	return nil, fmt.Errorf("format %q: want json or yaml", format)
}

func yamlNode(v any) *yaml3.Node {
	switch x := v.(type) {
	case obj:
		n := &yaml3.Node{Kind: yaml3.MappingNode}
		for _, f := range x {
			n.Content = append(n.Content, &yaml3.Node{Kind: yaml3.ScalarNode, Value: f.k}, yamlNode(f.v))
		}
		return n
	case []any:
		n := &yaml3.Node{Kind: yaml3.SequenceNode}
		for _, e := range x {
			n.Content = append(n.Content, yamlNode(e))
		}
		return n
	case []string:
		n := &yaml3.Node{Kind: yaml3.SequenceNode}
		for _, e := range x {
			n.Content = append(n.Content, &yaml3.Node{Kind: yaml3.ScalarNode, Tag: "!!str", Value: e})
		}
		return n
	case string:
		return &yaml3.Node{Kind: yaml3.ScalarNode, Tag: "!!str", Value: x}
	case bool:
		return &yaml3.Node{Kind: yaml3.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(x)}
	case int32:
		return &yaml3.Node{Kind: yaml3.ScalarNode, Tag: "!!int", Value: strconv.FormatInt(int64(x), 10)}
	case int64:
		return &yaml3.Node{Kind: yaml3.ScalarNode, Tag: "!!int", Value: strconv.FormatInt(x, 10)}
	case int:
		return &yaml3.Node{Kind: yaml3.ScalarNode, Tag: "!!int", Value: strconv.Itoa(x)}
	}
	n := &yaml3.Node{}
	_ = n.Encode(v)
	return n
}

// SpecObject is a job spec in the file format, fields in a reading order.
// The user is left out: a job runs as whoever submits it.
func SpecObject(s *events.JobSpec) obj {
	o := obj{}
	o.add("name", s.Name)
	o.add("priority", priority(s.Priority))
	o.add("count", s.TaskCount)
	if len(s.Labels) > 0 {
		o.add("labels", sortedMap(s.Labels))
	}
	if s.Appclass != "" {
		o.add("appclass", s.Appclass)
	}
	o.add("command", s.Command)
	if len(s.Args) > 0 {
		o.add("args", s.Args)
	}
	if len(s.Env) > 0 {
		o.add("env", sortedMap(s.Env))
	}
	if len(s.SecretEnv) > 0 {
		o.add("secret_env", s.SecretEnv)
	}
	if s.Resources != nil {
		o.add("resources", resources(s.Resources))
	}
	if len(s.PortNames) > 0 {
		o.add("port_names", s.PortNames)
	}
	if len(s.Constraints) > 0 {
		o.add("constraints", constraints(s.Constraints))
	}
	if len(s.Overrides) > 0 {
		o.add("tasks", overridesObj(s.Overrides))
	}
	if s.Restart != nil {
		o.add("restart", restartObj(s.Restart))
	}
	if s.HealthCheck != nil {
		o.add("health_check", healthCheckObj(s.HealthCheck))
	}
	if s.Update != nil {
		o.add("update", updateObj(s.Update))
	}
	if s.StartAfter != "" {
		o.add("start_after", s.StartAfter)
	}
	if len(s.Spread) > 0 {
		o.add("spread", s.Spread)
	}
	if s.Pack {
		o.add("spread", "none")
	}
	if s.DistinctHosts {
		o.add("distinct_hosts", true)
	}
	if s.AllocSet != "" {
		o.add("alloc_set", s.AllocSet)
	}
	if s.Package != "" {
		o.add("package", s.Package)
	}
	if s.KillTimeoutMs != 0 {
		o.add("kill_timeout", duration(s.KillTimeoutMs))
	}
	return o
}

// overridesObj is the tasks' overrides, by task index in order.
func overridesObj(overrides map[int32]*events.TaskOverride) obj {
	idx := make([]int32, 0, len(overrides))
	for i := range overrides {
		idx = append(idx, i)
	}
	slices.Sort(idx)
	tasks := obj{}
	for _, i := range idx {
		ov := overrides[i]
		t := obj{}
		if ov != nil {
			if len(ov.Args) > 0 {
				t.add("args", ov.Args)
			}
			if len(ov.Env) > 0 {
				t.add("env", sortedMap(ov.Env))
			}
			if ov.Resources != nil {
				t.add("resources", resources(ov.Resources))
			}
		}
		tasks.add(strconv.Itoa(int(i)), t)
	}
	return tasks
}

func restartObj(r *events.RestartPolicy) obj {
	ro := obj{}
	if r.Mode != "" {
		ro.add("mode", r.Mode)
	}
	if r.MaxRestarts != 0 {
		ro.add("max_restarts", r.MaxRestarts)
	}
	if r.BackoffInitialMs != 0 {
		ro.add("backoff", duration(r.BackoffInitialMs))
	}
	if r.BackoffMaxMs != 0 {
		ro.add("max_backoff", duration(r.BackoffMaxMs))
	}
	return ro
}

func healthCheckObj(h *events.HealthCheck) obj {
	ho := obj{}
	ho.add("path", h.Path)
	if h.PortName != "" {
		ho.add("port", h.PortName)
	}
	if h.PeriodMs != 0 {
		ho.add("period", duration(h.PeriodMs))
	}
	if h.TimeoutMs != 0 {
		ho.add("timeout", duration(h.TimeoutMs))
	}
	if h.FailuresAllowed != 0 {
		ho.add("failures_allowed", h.FailuresAllowed)
	}
	return ho
}

func updateObj(u *events.UpdatePolicy) obj {
	uo := obj{{"max_disruptions", u.MaxDisruptions}}
	if u.MinHealthyTimeMs != 0 {
		uo.add("min_healthy_time", duration(u.MinHealthyTimeMs))
	}
	if u.ProgressDeadlineMs != 0 {
		uo.add("progress_deadline", duration(u.ProgressDeadlineMs))
	}
	if u.AutoRevert != nil {
		uo.add("auto_revert", *u.AutoRevert)
	}
	if u.AutoCommit != nil {
		uo.add("auto_commit", *u.AutoCommit)
	}
	if u.Canary != 0 {
		uo.add("canary", u.Canary)
	}
	return uo
}

func allocSetObj(a AllocSet) obj {
	o := obj{}
	o.add("name", a.Name)
	o.add("priority", priority(a.Priority))
	o.add("count", a.Count)
	if len(a.Labels) > 0 {
		o.add("labels", sortedMap(a.Labels))
	}
	if a.Resources != nil {
		o.add("resources", resources(a.Resources))
	}
	if len(a.Constraints) > 0 {
		o.add("constraints", constraints(a.Constraints))
	}
	return o
}

// priority names the band when the priority is the band's default, as the
// file may; otherwise it is the number.
func priority(p int32) any {
	if b := projections.BandOf(p); b.DefaultPriority() == p {
		return b.String()
	}
	return p
}

func resources(r *events.Resources) obj {
	o := obj{}
	if r.CpuMilli != 0 {
		o.add("cpu", commands.FormatMilli(r.CpuMilli))
	}
	if r.MemoryBytes != 0 {
		o.add("memory", FormatBytes(r.MemoryBytes))
	}
	if r.DiskBytes != 0 {
		o.add("disk", FormatBytes(r.DiskBytes))
	}
	if r.Ports != 0 {
		o.add("ports", r.Ports)
	}
	if r.GpuMilli != 0 {
		o.add("gpu", commands.FormatMilli(r.GpuMilli))
	}
	return o
}

func constraints(cs []*events.Constraint) []any {
	out := make([]any, len(cs))
	for i, c := range cs {
		o := obj{}
		o.add("attribute", c.Attribute)
		o.add("op", c.Op)
		switch _, hi := scheduler.Op(c.Op).Values(); {
		case len(c.Values) == 1 && hi == 1:
			o.add("value", c.Values[0])
		case len(c.Values) > 0:
			o.add("values", c.Values)
		}
		if c.Soft {
			o.add("soft", true)
		}
		out[i] = o
	}
	return out
}

func sortedMap(m map[string]string) obj {
	o := obj{}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		o.add(k, m[k])
	}
	return o
}

// FormatBytes prints a byte count exactly, in the largest binary unit that
// divides it ("512MiB", "2GiB"), as ParseBytes reads it back.
func FormatBytes(n int64) string {
	units := []struct {
		name string
		size int64
	}{{"PiB", 1 << 50}, {"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}}
	for _, u := range units {
		if n != 0 && n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10)
}

// duration prints milliseconds as Go prints durations ("10s", "1m30s").
func duration(ms int64) string { return (time.Duration(ms) * time.Millisecond).String() }
