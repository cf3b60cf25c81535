package commands

import (
	"fmt"
	"strings"
	"testing"

	"github.com/corralhq/corral/events"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"
)

const fullSpecYAML = `
name: web
priority: production
count: 4
labels: {team: web, tier: frontend}
command: /bin/server
args: [--port, "8080"]
env: {MODE: prod, WORKERS: 8}
resources: {cpu: 500m, memory: 2GiB, disk: 10G, gpu: 0.5}
port_names: [http, admin]
constraints:
  - {attribute: arch, value: amd64}
  - {attribute: zone, op: in, values: [a, b], soft: true}
  - {attribute: cores, op: ">", value: 8}
  - {attribute: ssd, op: exists, hard: true}
tasks:
  "3": {args: [--canary], env: {MODE: canary}, resources: {cpu: 1, memory: 4Gi}}
restart: {mode: always, max_restarts: 5, backoff: 1s, max_backoff: 1m}
health_check: {path: /healthz, port: http, period: 10s, timeout: 2000, failures_allowed: 3}
update: {max_disruptions: 2}
start_after: build
alloc_set: pool
appclass: latency-sensitive
secret_env: [API_KEY]
package: web-1.2.3
`

func TestDecodeSpecFriendlyForms(t *testing.T) {
	got, err := decodeYAML([]byte(fullSpecYAML), "alice")
	if err != nil {
		t.Fatal(err)
	}
	want := &events.JobSpec{
		Name: "web", User: "alice", Priority: 9, TaskCount: 4,
		Labels:  map[string]string{"team": "web", "tier": "frontend"},
		Command: "/bin/server", Args: []string{"--port", "8080"},
		Env:       map[string]string{"MODE": "prod", "WORKERS": "8"},
		Resources: &events.Resources{CpuMilli: 500, MemoryBytes: 2 << 30, DiskBytes: 10e9, GpuMilli: 500, Ports: 2},
		PortNames: []string{"http", "admin"},
		Constraints: []*events.Constraint{
			{Attribute: "arch", Op: "=", Values: []string{"amd64"}},
			{Attribute: "zone", Op: "in", Values: []string{"a", "b"}, Soft: true},
			{Attribute: "cores", Op: ">", Values: []string{"8"}},
			{Attribute: "ssd", Op: "exists"},
		},
		Overrides: map[int32]*events.TaskOverride{3: {Args: []string{"--canary"}, Env: map[string]string{"MODE": "canary"},
			Resources: &events.Resources{CpuMilli: 1000, MemoryBytes: 4 << 30}}},
		Restart:     &events.RestartPolicy{Mode: "always", MaxRestarts: 5, BackoffInitialMs: 1000, BackoffMaxMs: 60000},
		HealthCheck: &events.HealthCheck{Path: "/healthz", PortName: "http", PeriodMs: 10000, TimeoutMs: 2000, FailuresAllowed: 3},
		Update:      &events.UpdatePolicy{MaxDisruptions: 2},
		StartAfter:  "build", AllocSet: "pool", Appclass: "latency-sensitive", SecretEnv: []string{"API_KEY"}, Package: "web-1.2.3",
	}
	if !proto.Equal(got, want) {
		t.Fatalf("got\n%s\nwant\n%s", prototext.Format(got), prototext.Format(want))
	}
}

func TestDecodeSpecJSONAndPriorities(t *testing.T) {
	for i, tc := range []struct {
		priority string
		want     int32
	}{
		{`"monitoring"`, 11}, {`"production"`, 9}, {`"batch"`, 4}, {`"best-effort"`, 0}, {`10`, 10}, {`"2"`, 2},
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			js := `{"name":"j","priority":` + tc.priority + `,"count":1,"command":"x","resources":{"cpu":0.25,"memory":"512Mi"}}`
			got, err := DecodeSpecJSON([]byte(js), "bob")
			if err != nil {
				t.Fatalf("%s: %v", tc.priority, err)
			}
			if got.Priority != tc.want || got.Resources.CpuMilli != 250 || got.Resources.MemoryBytes != 512<<20 || got.User != "bob" {
				t.Fatalf("%s: got %v", tc.priority, got)
			}
		})
	}
}

// Every problem is reported at once, each naming its field.
func TestDecodeSpecReportsEveryError(t *testing.T) {
	in := `
name: Web_1
priority: urgent
count: 3
command: ""
resources: {cpu: 0, memory: 2m, disk: -1}
colour: blue
constraints:
  - {attribute: arch, op: "~", value: x}
  - {attribute: zone, op: in}
tasks:
  "3": {resources: {cpu: 1, memory: 0}}
  "1": {resources: {cpu: 100m, memory: 0}}
restart: {mode: sometimes}
health_check: {path: healthz, port: http, period: 48h}
appclass: fast
secret_env: [TOKEN]
env: {TOKEN: abc}
user: mallory
`
	_, err := decodeYAML([]byte(in), "alice")
	if err == nil {
		t.Fatal("accepted")
	}
	e := err.(*Error)
	if e.Code != InvalidArgument {
		t.Fatalf("code %v", e.Code)
	}
	msg := e.Error()
	for _, want := range []string{
		`colour: unknown field`,
		`resources.memory: "2m": unit m means milli`,
		`name: "Web_1" must be 1-63 lowercase letters`,
		`priority: "urgent" is neither a band`,
		`user: the job runs as the caller, alice`,
		`command: must be set`,
		`resources.cpu: must be > 0`,
		`constraints[0].op: "~" is not =, !=, <, >, in or exists`,
		`constraints[1].values: in needs one or more values`,
		`tasks[1].resources.memory: must be > 0`,
		`tasks[3]: task 3 does not exist: the job has 3 tasks (0-2)`,
		`restart.mode: "sometimes" is not always, on-failure or never`,
		`health_check.path: must start with /`,
		`health_check.port: "http" is not one of port_names`,
		`health_check.period: must be 0 (the default, 10s) or up to 24h`,
		`appclass: "fast" is not latency-sensitive or batch`,
		`secret_env[0]: TOKEN also has a value in env`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("missing %q in:\n%s", want, strings.ReplaceAll(msg, "; ", "\n"))
		}
	}
	// disk: -1 is not a quantity; reported once, by the decoder.
	if n := strings.Count(msg, "resources.disk"); n != 1 {
		t.Errorf("resources.disk reported %d times:\n%s", n, msg)
	}
}

func TestValidateSpecNamesTheField(t *testing.T) {
	s := spec("web", 9, 4)
	s.Overrides = map[int32]*events.TaskOverride{3: {Resources: &events.Resources{CpuMilli: 100, MemoryBytes: 0}}}
	s.Resources.CpuMilli = 0
	err := ValidateSpec(s)
	if err == nil || err.Error() != "resources.cpu: must be > 0; tasks[3].resources.memory: must be > 0" {
		t.Fatalf("got %v", err)
	}
}

func TestParseQuantities(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		err  string
	}{
		{"500m", 500, ""}, {"0.5", 500, ""}, {"2", 2000, ""}, {"1.25", 1250, ""}, {"0.0005", 0, "finer"}, {"-1", 0, "negative"}, {"1e3", 0, "not a quantity"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseMilli(tc.in)
			if (err != nil) != (tc.err != "") || got != tc.want || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Errorf("ParseMilli(%q) = %d, %v; want %d, %q", tc.in, got, err, tc.want, tc.err)
			}
		})
	}
	for _, tc := range []struct {
		in   string
		want int64
		err  string
	}{
		{"2GiB", 2 << 30, ""}, {"512Mi", 512 << 20, ""}, {"1G", 1e9, ""}, {"1gb", 1e9, ""}, {"1.5GiB", 3 << 29, ""},
		{"100", 100, ""}, {"4KB", 4000, ""}, {"2m", 0, "milli"}, {"3 parsecs", 0, "unknown unit"},
		{"99999999999PiB", 0, "too large"}, {"0.5B", 0, "finer"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseBytes(tc.in)
			if (err != nil) != (tc.err != "") || got != tc.want || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Errorf("ParseBytes(%q) = %d, %v; want %d, %q", tc.in, got, err, tc.want, tc.err)
			}
		})
	}
	for _, tc := range []struct {
		in   string
		want int64
		err  bool
	}{{"10s", 10000, false}, {"1m30s", 90000, false}, {"250", 250, false}, {"1us", 0, true}, {"-1s", 0, true}, {"soon", 0, true}} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseDurationMS(tc.in)
			if (err != nil) != tc.err || got != tc.want {
				t.Errorf("ParseDurationMS(%q) = %d, %v", tc.in, got, err)
			}
		})
	}
}

func TestDecodeSpecNotAnObject(t *testing.T) {
	for _, in := range []string{"[1,2]", "42", "null", "{", "name: [unclosed", "{} {}"} {
		if _, err := decodeYAML([]byte(in), "alice"); CodeOf(err) != InvalidArgument {
			t.Errorf("%q: %v", in, err)
		}
	}
}

// decodeYAML reads a spec written in YAML as the CLI does: YAML to JSON,
// then DecodeSpecJSON.
func decodeYAML(data []byte, user string) (*events.JobSpec, error) {
	if len(data) > MaxSpecBytes {
		return nil, invalid("", "the spec is %d bytes, more than the %d allowed", len(data), MaxSpecBytes)
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, invalid("", "not YAML or JSON: %v", err)
	}
	return DecodeSpecJSON(js, user)
}

// "spread: none" opts a job out of spreading by default; any other word
// there, or none together with attributes, is refused naming the field.
func TestSpreadNoneOptsOut(t *testing.T) {
	base := "name: batch\ncount: 3\ncommand: /bin/true\nresources: {cpu: 100m, memory: 64Mi}\n"
	got, err := decodeYAML([]byte(base+"spread: none\n"), "alice")
	if err != nil {
		t.Fatal(err)
	}
	if !got.Pack || len(got.Spread) != 0 {
		t.Fatalf("spread: none gave pack %v, spread %v", got.Pack, got.Spread)
	}
	got, err = decodeYAML([]byte(base+"spread: [rack]\n"), "alice")
	if err != nil || got.Pack || len(got.Spread) != 1 {
		t.Fatalf("spread: [rack] gave %v, pack %v, spread %v", err, got.GetPack(), got.GetSpread())
	}
	if _, err := decodeYAML([]byte(base+"spread: rack\n"), "alice"); err == nil ||
		!strings.Contains(err.Error(), `spread: must be "none" or a list of machine attributes, not "rack"`) {
		t.Fatalf("spread: rack gave %v", err)
	}
	s := spec("web", 9, 2)
	s.Pack, s.Spread = true, []string{"rack"}
	if err := ValidateSpec(s); err == nil || !strings.Contains(err.Error(), "spread: none (pack) and attributes to spread across ([rack]) exclude each other") {
		t.Fatalf("pack with spread attributes gave %v", err)
	}
}
