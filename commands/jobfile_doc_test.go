package commands

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/corralhq/corral/events"
)

// TestJobFileReferenceCoversTheFormat: docs/jobfile.md documents every
// field the spec decoder reads, at every level, so a new field cannot land
// undocumented. The decoder itself says which fields it knows: an unknown
// field's refusal lists them.
func TestJobFileReferenceCoversTheFormat(t *testing.T) {
	doc, err := os.ReadFile("../docs/jobfile.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path, probe, heading string
	}{
		{"", `{"zz": 1}`, "## A job"},
		{"resources", `{"resources": {"zz": 1}}`, "### `resources`"},
		{"constraints[0]", `{"constraints": [{"zz": 1}]}`, "### `constraints`"},
		{"tasks[0]", `{"tasks": {"0": {"zz": 1}}}`, "### `tasks`"},
		{"restart", `{"restart": {"zz": 1}}`, "### `restart`"},
		{"health_check", `{"health_check": {"zz": 1}}`, "### `health_check`"},
		{"update", `{"update": {"zz": 1}}`, "### `update`"},
	} {
		t.Run(c.path, func(t *testing.T) {
			known := knownFields(t, c.path, c.probe)
			section := docSection(t, string(doc), c.heading)
			for _, f := range known {
				if !strings.Contains(section, "| `"+f+"` |") {
					t.Errorf("docs/jobfile.md, %s: field %s is not documented (a row | `%s` | ...)", c.heading, join(c.path, f), f)
				}
			}
		})
	}
}

// knownFields decodes probe, which holds the unknown field zz at path, and
// returns the fields the decoder says it knows there.
func knownFields(t *testing.T, path, probe string) []string {
	t.Helper()
	_, err := DecodeSpecJSON([]byte(probe), "alice")
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("%s: %v", probe, err)
	}
	for _, d := range ce.Details {
		if d.Field != join(path, "zz") {
			continue
		}
		_, list, ok := strings.Cut(d.Reason, "known fields here: ")
		if !ok {
			t.Fatalf("%s: %q does not list the known fields", probe, d.Reason)
		}
		return strings.Split(list, ", ")
	}
	t.Fatalf("%s: no refusal of %s in %v", probe, join(path, "zz"), err)
	return nil
}

// docSection is the text under heading, up to the next heading of any
// level.
func docSection(t *testing.T, doc, heading string) string {
	t.Helper()
	i := strings.Index(doc, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("docs/jobfile.md has no heading %q", heading)
	}
	rest := doc[i+len(heading)+2:]
	if j := strings.Index(rest, "\n#"); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

// TestJobFileHealthCheckDefaults: the defaults docs/jobfile.md states for a
// health check are the ones the master admits and the agent runs (the
// constants in package events), and a check that gives only its path is
// accepted with them.
func TestJobFileHealthCheckDefaults(t *testing.T) {
	doc, err := os.ReadFile("../docs/jobfile.md")
	if err != nil {
		t.Fatal(err)
	}
	section := docSection(t, string(doc), "### `health_check`")
	for field, want := range map[string]string{
		"port":    "the first port",
		"period":  "`" + events.DefaultHealthCheckPeriod.String() + "`",
		"timeout": "`" + events.DefaultHealthCheckTimeout.String() + "`",
	} {
		if got := docDefault(t, section, field); !strings.HasPrefix(got, want) {
			t.Errorf("docs/jobfile.md: health_check.%s defaults to %q; the master and agent use %s", field, got, want)
		}
	}

	spec, err := DecodeSpecJSON([]byte(`{"name": "web", "count": 1, "command": "/bin/server",
  "resources": {"cpu": 1, "memory": "64MiB"}, "port_names": ["http", "admin"],
  "health_check": {"path": "/"}}`), "alice")
	if err != nil {
		t.Fatalf("health_check {path: /} refused: %v", err)
	}
	h := spec.HealthCheck
	if got := events.HealthCheckPeriod(h); got != events.DefaultHealthCheckPeriod {
		t.Errorf("period %s, want the default %s", got, events.DefaultHealthCheckPeriod)
	}
	if got := events.HealthCheckTimeout(h); got != events.DefaultHealthCheckTimeout {
		t.Errorf("timeout %s, want the default %s", got, events.DefaultHealthCheckTimeout)
	}

	// Without a port there is nothing to check: the refusal says so.
	_, err = DecodeSpecJSON([]byte(`{"name": "web", "count": 1, "command": "/bin/server",
  "resources": {"cpu": 1, "memory": "64MiB"}, "health_check": {"path": "/"}}`), "alice")
	if err == nil || !strings.Contains(err.Error(), "health_check.port: the task has no port to check") {
		t.Errorf("a check without a port: %v", err)
	}
}

// docDefault is the last cell of the table row for field in section.
func docDefault(t *testing.T, section, field string) string {
	t.Helper()
	for line := range strings.SplitSeq(section, "\n") {
		if !strings.HasPrefix(line, "| `"+field+"` |") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		return cells[len(cells)-1]
	}
	t.Fatalf("no row for %s", field)
	return ""
}
