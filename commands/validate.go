package commands

import (
	"regexp"
	"slices"
	"strings"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
	"github.com/corralhq/corral/scheduler"
)

// Limits of a spec. MaxTasks bounds one job (Borg's largest jobs have tens
// of thousands of tasks); what one task may ask is events' (MaxTask*,
// MinTaskMemoryBytes), shared with the agent; the others keep a spec's size
// in the log sane.
const (
	MaxTasks        = events.MaxTasksPerJob
	MaxPortsPerTask = events.MaxTaskPorts
	maxNameLen      = 63
	maxArgs         = 1024
	maxTextLen      = 4096
	maxLabelsOrEnv  = 256
	maxConstraints  = 64
	maxPolicyMS     = 24 * 3600 * 1000
	maxSpread       = 4 // failure-domain attributes a job spreads across
	minBackoffMS    = 10
	minMaxBackoffMS = 100
)

// nameRE: a DNS label, since a task's DNS name is index.job.user.cell.
var nameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

var envRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ValidName reports whether s can name a job, user, machine or alloc set.
func ValidName(s string) bool { return len(s) <= maxNameLen && nameRE.MatchString(s) }

func checkName(v *violations, field, s string) {
	switch {
	case s == "":
		v.add(field, "must be set")
	case !ValidName(s):
		v.add(field, "%q must be 1-%d lowercase letters, digits and '-', starting and ending with a letter or digit", s, maxNameLen)
	}
}

// ValidateSpec checks a spec as the API receives it (already decoded) and
// returns every violation at once, fields named as in a spec file.
func ValidateSpec(spec *events.JobSpec) error {
	return validateSpec(spec).err()
}

func validateSpec(spec *events.JobSpec) violations {
	var v violations
	if spec == nil {
		v.add("spec", "must be set")
		return v
	}
	checkIdentity(&v, spec)
	checkCommand(&v, spec)
	ports := int(spec.GetResources().GetPorts())
	checkPortNames(&v, spec, ports)
	checkConstraints(&v, spec)
	checkOverrides(&v, spec)
	checkRestart(&v, spec)
	if ms := spec.KillTimeoutMs; ms < 0 || ms > events.MaxKillTimeout.Milliseconds() {
		v.add("kill_timeout", "must be between 0 (the default, %s) and %s", events.DefaultKillTimeout, events.MaxKillTimeout)
	}
	checkHealthCheck(&v, spec, ports)
	checkUpdate(&v, spec)
	checkPlacement(&v, spec)
	checkSecretEnv(&v, spec)
	if len(spec.Package) > maxTextLen {
		v.add("package", "longer than %d bytes", maxTextLen)
	}
	return v
}

// checkIdentity checks the job's name, user, priority, task count and labels.
func checkIdentity(v *violations, spec *events.JobSpec) {
	checkName(v, "name", spec.Name)
	if spec.User != "" && !ValidName(spec.User) {
		v.add("user", "%q is not a valid user name", spec.User)
	}
	if spec.Priority < 0 || spec.Priority > projections.MaxPriority {
		v.add("priority", "%d is outside 0-%d (best-effort 0-1, batch 2-8, production 9-10, monitoring 11)", spec.Priority, projections.MaxPriority)
	}
	switch {
	case spec.TaskCount <= 0:
		v.add("count", "must be > 0")
	case spec.TaskCount > MaxTasks:
		v.add("count", "%d is more than the %d tasks a job may have", spec.TaskCount, MaxTasks)
	}
	checkLabels(v, "labels", spec.Labels)
}

// checkCommand checks what the tasks run: command, args, env and resources.
func checkCommand(v *violations, spec *events.JobSpec) {
	if strings.TrimSpace(spec.Command) == "" {
		v.add("command", "must be set")
	} else if len(spec.Command) > maxTextLen {
		v.add("command", "longer than %d bytes", maxTextLen)
	} else if strings.IndexByte(spec.Command, 0) >= 0 {
		v.add("command", "contains a NUL byte")
	}
	checkArgs(v, "args", spec.Args)
	checkEnv(v, "env", spec.Env)
	checkResources(v, "resources", spec.Resources, true)
}

// checkPortNames checks the names given to the task's ports.
func checkPortNames(v *violations, spec *events.JobSpec, ports int) {
	if len(spec.PortNames) > ports {
		v.add("port_names", "names %d ports but resources.ports is %d", len(spec.PortNames), ports)
	}
	for i, p := range spec.PortNames {
		if !ValidName(p) || len(p) > events.MaxPortNameLen {
			v.add(index("port_names", i), "%q must be a lowercase name like http, at most %d characters", p, events.MaxPortNameLen)
		} else if slices.Index(spec.PortNames, p) != i {
			v.add(index("port_names", i), "%q is named twice", p)
		}
	}
}

// checkConstraints checks the job's hard constraints.
func checkConstraints(v *violations, spec *events.JobSpec) {
	if len(spec.Constraints) > maxConstraints {
		v.add("constraints", "more than %d", maxConstraints)
	}
	for i, c := range spec.Constraints {
		checkConstraint(v, index("constraints", i), c)
	}
}

// checkOverrides checks the per-task overrides: each names a task of the job.
func checkOverrides(v *violations, spec *events.JobSpec) {
	for _, i := range sortedIndexes(spec.Overrides) {
		p := index("tasks", int(i))
		ov := spec.Overrides[i]
		if i < 0 || i >= spec.TaskCount {
			v.add(p, "task %d does not exist: the job has %d tasks (0-%d)", i, spec.TaskCount, max(spec.TaskCount-1, 0))
			continue
		}
		if ov == nil {
			continue
		}
		checkArgs(v, join(p, "args"), ov.Args)
		checkEnv(v, join(p, "env"), ov.Env)
		if ov.Resources != nil {
			checkResources(v, join(p, "resources"), ov.Resources, false)
		}
	}
}

// checkRestart checks the restart policy.
func checkRestart(v *violations, spec *events.JobSpec) {
	r := spec.Restart
	if r == nil {
		return
	}
	switch r.Mode {
	case "", "always", "on-failure", "never":
	default:
		v.add("restart.mode", "%q is not always, on-failure or never", r.Mode)
	}
	if r.MaxRestarts < 0 {
		v.add("restart.max_restarts", "must be >= 0 (0: no limit)")
	}
	// Floors: a task that fails at once must not restart thousands of
	// times a second, each restart two events in the log.
	if r.BackoffInitialMs != 0 && (r.BackoffInitialMs < minBackoffMS || r.BackoffInitialMs > maxPolicyMS) {
		v.add("restart.backoff", "must be 0 (the default, 1s) or between %dms and 24h", minBackoffMS)
	}
	if r.BackoffMaxMs != 0 && (r.BackoffMaxMs < minMaxBackoffMS || r.BackoffMaxMs > maxPolicyMS) {
		v.add("restart.max_backoff", "must be 0 (the default, 5m) or between %dms and 24h", minMaxBackoffMS)
	} else if r.BackoffMaxMs > 0 && r.BackoffMaxMs < r.BackoffInitialMs {
		v.add("restart.max_backoff", "must be >= restart.backoff")
	}
}

// checkHealthCheck checks the health check against the task's ports.
func checkHealthCheck(v *violations, spec *events.JobSpec, ports int) {
	h := spec.HealthCheck
	if h == nil {
		return
	}
	if !strings.HasPrefix(h.Path, "/") {
		v.add("health_check.path", "must start with /")
	}
	// Left out, port is the task's first port and period and timeout
	// their defaults (events.HealthCheckPeriod, HealthCheckTimeout),
	// as the agent reads them.
	if h.PortName == "" {
		if ports == 0 {
			v.add("health_check.port", "the task has no port to check: give resources.ports or port_names")
		}
	} else if !slices.Contains(spec.PortNames, h.PortName) {
		v.add("health_check.port", "%q is not one of port_names %v", h.PortName, spec.PortNames)
	}
	if h.PeriodMs < 0 || h.PeriodMs > maxPolicyMS {
		v.add("health_check.period", "must be 0 (the default, %s) or up to 24h", events.DefaultHealthCheckPeriod)
	}
	if h.TimeoutMs < 0 || h.TimeoutMs > events.HealthCheckPeriod(h).Milliseconds() {
		v.add("health_check.timeout", "must be between 0 (the default, %s) and the period", events.DefaultHealthCheckTimeout)
	}
	if h.FailuresAllowed < 0 {
		v.add("health_check.failures_allowed", "must be >= 0")
	}
}

// checkUpdate checks the rolling update policy.
func checkUpdate(v *violations, spec *events.JobSpec) {
	u := spec.Update
	if u == nil {
		return
	}
	if u.MaxDisruptions < 0 {
		v.add("update.max_disruptions", "must be >= 0 (0: the default, 1)")
	}
	if u.MinHealthyTimeMs < 0 || u.MinHealthyTimeMs > maxPolicyMS {
		v.add("update.min_healthy_time", "must be between 0 (the default, 10s) and 24h")
	}
	if u.ProgressDeadlineMs != 0 && (u.ProgressDeadlineMs < 1000 || u.ProgressDeadlineMs > maxPolicyMS) {
		v.add("update.progress_deadline", "must be 0 (the default, 10m) or between 1s and 24h")
	}
	if u.Canary < 0 || u.Canary > spec.TaskCount {
		v.add("update.canary", "must be between 0 (no canaries) and the task count, %d", spec.TaskCount)
	}
}

// checkPlacement checks what orders and places the job: start_after, alloc_set, spread and appclass.
func checkPlacement(v *violations, spec *events.JobSpec) {
	if spec.StartAfter != "" {
		checkName(v, "start_after", spec.StartAfter)
		if spec.StartAfter == spec.Name {
			v.add("start_after", "a job cannot wait for itself")
		}
	}
	if spec.AllocSet != "" {
		checkName(v, "alloc_set", spec.AllocSet)
	}
	if spec.Pack && len(spec.Spread) > 0 {
		v.add("spread", "none (pack) and attributes to spread across (%v) exclude each other", spec.Spread)
	}
	if len(spec.Spread) > maxSpread {
		v.add("spread", "at most %d attributes, not %d", maxSpread, len(spec.Spread))
	}
	for i, a := range spec.Spread {
		switch {
		case !events.ValidLabelKey(a):
			v.add(index("spread", i), "%q is not an attribute name", a)
		case slices.Index(spec.Spread, a) != i:
			v.add(index("spread", i), "%q is named twice", a)
		}
	}
	switch spec.Appclass {
	case "", "latency-sensitive", "batch":
	default:
		v.add("appclass", "%q is not latency-sensitive or batch", spec.Appclass)
	}
}

// checkSecretEnv checks the names of the secrets given to the tasks as environment variables.
func checkSecretEnv(v *violations, spec *events.JobSpec) {
	for i, name := range spec.SecretEnv {
		p := index("secret_env", i)
		switch {
		case !envRE.MatchString(name):
			v.add(p, "%q is not an environment variable name", name)
		case ReservedEnv(name):
			v.add(p, "%s is set by the agent for every task (CORRAL_*, PORT, PORT_*, PWD): choose another name", name)
		case slices.Index(spec.SecretEnv, name) != i:
			v.add(p, "%q is listed twice", name)
		}
		if _, ok := spec.Env[name]; ok {
			v.add(p, "%s also has a value in env; a secret's value must not be in the spec (it would be kept in the log)", name)
		}
	}
}

func checkLabels(v *violations, field string, labels map[string]string) {
	if len(labels) > maxLabelsOrEnv {
		v.add(field, "more than %d labels", maxLabelsOrEnv)
	}
	for _, k := range sortedKeys(labels) {
		if !events.ValidLabelKey(k) {
			v.add(join(field, k), "%q is not a label key: 1-63 letters, digits, '-', '_', '.' or '/', starting and ending with a letter or digit", k)
		} else if !events.ValidLabelValue(labels[k]) {
			v.add(join(field, k), "%q is not a label value: up to 63 letters, digits, '-', '_', '.' or '/'", labels[k])
		}
	}
}

func checkArgs(v *violations, field string, args []string) {
	if len(args) > maxArgs {
		v.add(field, "more than %d arguments", maxArgs)
	}
	for i, a := range args {
		if len(a) > maxTextLen {
			v.add(index(field, i), "longer than %d bytes", maxTextLen)
		} else if strings.IndexByte(a, 0) >= 0 {
			v.add(index(field, i), "contains a NUL byte")
		}
	}
}

// ReservedEnv reports whether the agent sets the variable name for every
// task itself (CORRAL_*, PORT, PORT_*, PWD), so a spec may not.
func ReservedEnv(name string) bool { return events.ReservedEnv(name) }

func checkEnv(v *violations, field string, env map[string]string) {
	if len(env) > maxLabelsOrEnv {
		v.add(field, "more than %d variables", maxLabelsOrEnv)
	}
	for _, k := range sortedKeys(env) {
		switch {
		case !envRE.MatchString(k):
			v.add(join(field, k), "%q is not an environment variable name", k)
		case ReservedEnv(k):
			v.add(join(field, k), "%s is set by the agent for every task (CORRAL_*, PORT, PORT_*, PWD): choose another name", k)
		case len(env[k]) > maxTextLen:
			v.add(join(field, k), "value longer than %d bytes", maxTextLen)
		case strings.IndexByte(env[k], 0) >= 0:
			v.add(join(field, k), "value contains a NUL byte")
		}
	}
}

func checkResources(v *violations, field string, r *events.Resources, required bool) {
	if r == nil {
		if required {
			v.add(join(field, "cpu"), "must be > 0")
			v.add(join(field, "memory"), "must be > 0")
		}
		return
	}
	switch {
	case r.CpuMilli <= 0:
		v.add(join(field, "cpu"), "must be > 0")
	case r.CpuMilli > events.MaxTaskCPUMilli:
		v.add(join(field, "cpu"), "%s is more than a task may ask: at most %s (%d cores)", FormatMilli(r.CpuMilli), FormatMilli(events.MaxTaskCPUMilli), events.MaxTaskCPUMilli/1000)
	}
	switch {
	case r.MemoryBytes <= 0:
		v.add(join(field, "memory"), "must be > 0")
	case r.MemoryBytes < events.MinTaskMemoryBytes:
		v.add(join(field, "memory"), "%d bytes is below the %s a task needs at least (its agent cannot start less)", r.MemoryBytes, projections.FormatBytes(events.MinTaskMemoryBytes))
	case r.MemoryBytes > events.MaxTaskMemoryBytes:
		v.add(join(field, "memory"), "%d bytes is more than a task may ask: at most %s", r.MemoryBytes, projections.FormatBytes(events.MaxTaskMemoryBytes))
	}
	switch {
	case r.DiskBytes < 0:
		v.add(join(field, "disk"), "must be >= 0")
	case r.DiskBytes > events.MaxTaskDiskBytes:
		v.add(join(field, "disk"), "%d bytes is more than a task may ask: at most %s", r.DiskBytes, projections.FormatBytes(events.MaxTaskDiskBytes))
	}
	switch {
	case r.GpuMilli < 0:
		v.add(join(field, "gpu"), "must be >= 0")
	case r.GpuMilli > events.MaxTaskGPUMilli:
		v.add(join(field, "gpu"), "%s is more than a task may ask: at most %s (%d GPUs)", FormatMilli(r.GpuMilli), FormatMilli(events.MaxTaskGPUMilli), events.MaxTaskGPUMilli/1000)
	}
	if r.Ports < 0 || r.Ports > MaxPortsPerTask {
		v.add(join(field, "ports"), "must be between 0 and %d", MaxPortsPerTask)
	}
}

func checkConstraint(v *violations, field string, c *events.Constraint) {
	if c == nil {
		v.add(field, "must be set")
		return
	}
	if !events.ValidLabelKey(c.Attribute) {
		v.add(join(field, "attribute"), "%q is not an attribute name", c.Attribute)
	}
	switch op := scheduler.Op(c.Op); {
	case c.Op == "":
		v.add(join(field, "op"), "must be set: %s", scheduler.OpNames())
	case !op.Valid():
		v.add(join(field, "op"), "%q is not %s", c.Op, scheduler.OpNames())
	default:
		// One value is given as "value" in a spec, several as "values".
		name := "values"
		if _, hi := op.Values(); hi == 1 {
			name = "value"
		}
		if why := op.WhyNotValues(len(c.Values)); why != "" {
			v.add(join(field, name), "%s", why)
		}
	}
	for i, val := range c.Values {
		if len(val) > maxNameLen*4 {
			v.add(index(join(field, "values"), i), "longer than %d bytes", maxNameLen*4)
		}
	}
}

func sortedIndexes[V any](m map[int32]V) []int32 {
	out := make([]int32, 0, len(m))
	for i := range m {
		out = append(out, i)
	}
	slices.Sort(out)
	return out
}
