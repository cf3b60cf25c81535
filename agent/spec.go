package agent

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/corralhq/corral/agent/agentpb"
	"github.com/corralhq/corral/events"
	"google.golang.org/protobuf/proto"
)

// TaskKey names a task as "user/job/index".
func TaskKey(ref *events.TaskRef) string {
	return ref.GetUser() + "/" + ref.GetJob() + "/" + strconv.Itoa(int(ref.GetIndex()))
}

var (
	// User and job names become directory and cgroup names.
	pathNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)
	envNameRE  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	portNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,` + strconv.Itoa(events.MaxPortNameLen) + `}$`)
)

// ValidateTaskRef checks a task reference as the agent does before it acts
// on one: its names become directory and cgroup names.
func ValidateTaskRef(ref *events.TaskRef) error {
	if ref == nil {
		return errors.New("task: required")
	}
	if !pathNameRE.MatchString(ref.User) {
		return fmt.Errorf("task.user %q: want 1-64 letters, digits, '_' or '-', starting with a letter or digit", ref.User)
	}
	if !pathNameRE.MatchString(ref.Job) {
		return fmt.Errorf("task.job %q: want 1-64 letters, digits, '_' or '-', starting with a letter or digit", ref.Job)
	}
	if ref.Index < 0 {
		return fmt.Errorf("task.index %d: must not be negative", ref.Index)
	}
	return nil
}

// ValidateTaskSpec validates a resolved task spec exactly as the agent does
// before it starts or updates a task (the simulated agents call it too).
// The error names the field.
func ValidateTaskSpec(s *agentpb.TaskSpec) error {
	if s == nil {
		return errors.New("spec: required")
	}
	if s.Command == "" {
		return errors.New("spec.command: required")
	}
	if strings.ContainsRune(s.Command, 0) {
		return errors.New("spec.command: contains a NUL byte")
	}
	if s.KillTimeoutMs < 0 || s.KillTimeoutMs > events.MaxKillTimeout.Milliseconds() {
		return fmt.Errorf("spec.kill_timeout_ms %d: must be between 0 (the stop's grace) and %d", s.KillTimeoutMs, events.MaxKillTimeout.Milliseconds())
	}
	for _, check := range []func(*agentpb.TaskSpec) error{checkArgsEnv, checkResources, checkPorts, checkRestart, checkHealthCheck} {
		if err := check(s); err != nil {
			return err
		}
	}
	switch s.Appclass {
	case "", "latency-sensitive", "batch":
	default:
		return fmt.Errorf("spec.appclass %q: want latency-sensitive or batch", s.Appclass)
	}
	if s.Priority < 0 || s.Priority > 11 {
		return fmt.Errorf("spec.priority %d: want 0-11", s.Priority)
	}
	return nil
}

// checkArgsEnv checks the task's arguments and environment.
func checkArgsEnv(s *agentpb.TaskSpec) error {
	for i, a := range s.Args {
		if strings.ContainsRune(a, 0) {
			return fmt.Errorf("spec.args[%d]: contains a NUL byte", i)
		}
	}
	for k, v := range s.Env {
		if !envNameRE.MatchString(k) {
			return fmt.Errorf("spec.env[%q]: not a valid variable name", k)
		}
		if events.ReservedEnv(k) {
			return fmt.Errorf("spec.env[%s]: reserved for the agent", k)
		}
		if strings.ContainsRune(v, 0) {
			return fmt.Errorf("spec.env[%s]: value contains a NUL byte", k)
		}
	}
	return nil
}

// checkResources checks the task's limits.
func checkResources(s *agentpb.TaskSpec) error {
	if r := s.Resources; r != nil {
		if r.CpuMilli < 0 || r.MemoryBytes < 0 || r.DiskBytes < 0 || r.Ports < 0 || r.GpuMilli < 0 {
			return fmt.Errorf("spec.resources %v: quantities must not be negative", r)
		}
		// The master's validation reads the same floor: it never admits
		// a task refused here.
		if r.MemoryBytes > 0 && r.MemoryBytes < events.MinTaskMemoryBytes {
			return fmt.Errorf("spec.resources.memory_bytes %d: below the %d MiB minimum", r.MemoryBytes, events.MinTaskMemoryBytes>>20)
		}
	}
	return nil
}

// checkPorts checks the task's ports: numbers in range, numbers and names
// given once.
func checkPorts(s *agentpb.TaskSpec) error {
	names := map[string]bool{}
	numbers := map[int32]bool{}
	for i, p := range s.Ports {
		if p.Number < 1 || p.Number > 65535 {
			return fmt.Errorf("spec.ports[%d].number %d: want 1-65535", i, p.Number)
		}
		if numbers[p.Number] {
			return fmt.Errorf("spec.ports[%d].number %d: assigned twice", i, p.Number)
		}
		numbers[p.Number] = true
		if p.Name != "" {
			if !portNameRE.MatchString(p.Name) {
				return fmt.Errorf("spec.ports[%d].name %q: want 1-32 letters, digits, '_' or '-'", i, p.Name)
			}
			if names[portEnvName(p.Name)] {
				return fmt.Errorf("spec.ports[%d].name %q: used twice", i, p.Name)
			}
			names[portEnvName(p.Name)] = true
		}
	}
	return nil
}

// checkRestart checks the task's restart policy.
func checkRestart(s *agentpb.TaskSpec) error {
	if r := s.Restart; r != nil {
		switch r.Mode {
		case "", "always", "on-failure", "never":
		default:
			return fmt.Errorf("spec.restart.mode %q: want always, on-failure or never", r.Mode)
		}
		if r.MaxRestarts < 0 {
			return fmt.Errorf("spec.restart.max_restarts %d: must not be negative", r.MaxRestarts)
		}
		if r.BackoffInitialMs < 0 || r.BackoffMaxMs < 0 {
			return fmt.Errorf("spec.restart backoff %d-%d ms: must not be negative", r.BackoffInitialMs, r.BackoffMaxMs)
		}
		if r.BackoffMaxMs > 0 && r.BackoffInitialMs > r.BackoffMaxMs {
			return fmt.Errorf("spec.restart.backoff_initial_ms %d: above backoff_max_ms %d", r.BackoffInitialMs, r.BackoffMaxMs)
		}
	}
	return nil
}

// checkHealthCheck checks the task's health check, if it has one.
func checkHealthCheck(s *agentpb.TaskSpec) error {
	if h := s.HealthCheck; h != nil && h.Path != "" {
		if !strings.HasPrefix(h.Path, "/") {
			return fmt.Errorf("spec.health_check.path %q: must start with '/'", h.Path)
		}
		if _, err := healthPort(s); err != nil {
			return err
		}
		if h.PeriodMs < 0 || h.TimeoutMs < 0 || h.FailuresAllowed < 0 {
			return fmt.Errorf("spec.health_check: period_ms, timeout_ms and failures_allowed must not be negative")
		}
	}
	return nil
}

func healthPort(s *agentpb.TaskSpec) (int32, error) {
	h := s.HealthCheck
	for _, p := range s.Ports {
		if h.PortName == "" || p.Name == h.PortName {
			return p.Number, nil
		}
	}
	if h.PortName == "" {
		return 0, errors.New("spec.health_check.port_name: the task has no port to check")
	}
	return 0, fmt.Errorf("spec.health_check.port_name %q: no assigned port has that name", h.PortName)
}

// portEnvName turns a port name into the suffix of its PORT_ variable.
func portEnvName(name string) string {
	return strings.Map(func(r rune) rune {
		if r == '-' {
			return '_'
		}
		return r
	}, strings.ToUpper(name))
}

// defaultPath is a task's PATH unless its spec sets one: the agent's own
// environment is never passed on.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// taskEnv is the whole environment of a task process: a minimal base, the
// spec's variables, then the agent's CORRAL_ and PORT variables, which the
// spec cannot set.
func taskEnv(ref *events.TaskRef, cell string, s *agentpb.TaskSpec, sandbox string) []string {
	// PWD is what the shell that moves the task into its container would
	// export anyway; setting it keeps the environment exactly this list.
	env := map[string]string{
		"PATH":   defaultPath,
		"HOME":   filepath.Join(sandbox, "work"),
		"PWD":    filepath.Join(sandbox, "work"),
		"TMPDIR": filepath.Join(sandbox, "tmp"),
	}
	maps.Copy(env, s.Env)
	name := fmt.Sprintf("%d.%s.%s", ref.Index, ref.Job, ref.User)
	if cell != "" {
		name += "." + cell
	}
	env["CORRAL_TASK_INDEX"] = strconv.Itoa(int(ref.Index))
	env["CORRAL_JOB"] = ref.Job
	env["CORRAL_USER"] = ref.User
	env["CORRAL_CELL"] = cell
	env["CORRAL_NAME"] = name + ".corral"
	env["CORRAL_SANDBOX"] = sandbox
	for i, p := range s.Ports {
		n := strconv.Itoa(int(p.Number))
		if i == 0 {
			env["PORT"] = n
		}
		if p.Name != "" {
			env["PORT_"+portEnvName(p.Name)] = n
		} else {
			env["PORT_"+strconv.Itoa(i)] = n
		}
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// lookPath resolves command the way a shell would, with the task's PATH,
// not the agent's. A command with a slash is taken relative to dir.
func lookPath(command string, env []string, dir string) (string, error) {
	check := func(p string) error {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		if fi.IsDir() || fi.Mode()&0o111 == 0 {
			return fmt.Errorf("%s is not an executable file", p)
		}
		return nil
	}
	if strings.Contains(command, "/") {
		p := command
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if err := check(p); err != nil {
			return "", fmt.Errorf("spec.command %q: %w", command, err)
		}
		return p, nil
	}
	path := defaultPath
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, d := range filepath.SplitList(path) {
		if d == "" {
			d = "."
		}
		if !filepath.IsAbs(d) {
			d = filepath.Join(dir, d)
		}
		p := filepath.Join(d, command)
		if check(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("spec.command %q: not found in PATH %q", command, path)
}

// ResolveSpec is the spec the master sends an agent for one task of a job:
// the job's spec with the index's override applied and the assigned ports
// named by the job's port names in order.
func ResolveSpec(job *events.JobSpec, index int32, ports []int32) (*agentpb.TaskSpec, error) {
	if job == nil {
		return nil, errors.New("job: required")
	}
	if index < 0 || (job.TaskCount > 0 && index >= job.TaskCount) {
		return nil, fmt.Errorf("index %d: want 0-%d", index, job.TaskCount-1)
	}
	if want := int(job.GetResources().GetPorts()); want > 0 && len(ports) != want {
		return nil, fmt.Errorf("ports: %d assigned, the job asks for %d", len(ports), want)
	}
	s := &agentpb.TaskSpec{
		Command:     job.Command,
		Args:        slices.Clone(job.Args),
		Env:         maps.Clone(job.Env),
		Resources:   proto.Clone(orEmpty(job.Resources)).(*events.Resources),
		Restart:     job.Restart,
		HealthCheck: job.HealthCheck,
		Appclass:    job.Appclass,
		Priority:    job.Priority,
		// Only what the job says: the stop's grace or the agent's default
		// (the same 10 s) otherwise.
		KillTimeoutMs: job.KillTimeoutMs,
	}
	if s.Env == nil {
		s.Env = map[string]string{}
	}
	if o := job.Overrides[index]; o != nil {
		if len(o.Args) > 0 {
			s.Args = slices.Clone(o.Args)
		}
		maps.Copy(s.Env, o.Env)
		if o.Resources != nil {
			s.Resources = proto.Clone(o.Resources).(*events.Resources)
		}
	}
	for i, n := range ports {
		p := &agentpb.Port{Number: n}
		if i < len(job.PortNames) {
			p.Name = job.PortNames[i]
		}
		s.Ports = append(s.Ports, p)
	}
	if err := ValidateTaskSpec(s); err != nil {
		return nil, err
	}
	return s, nil
}

func orEmpty(r *events.Resources) *events.Resources {
	if r == nil {
		return &events.Resources{}
	}
	return r
}
