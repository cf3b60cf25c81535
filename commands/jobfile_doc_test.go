package commands

import (
	"errors"
	"os"
	"strings"
	"testing"
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
		known := knownFields(t, c.path, c.probe)
		section := docSection(t, string(doc), c.heading)
		for _, f := range known {
			if !strings.Contains(section, "| `"+f+"` |") {
				t.Errorf("docs/jobfile.md, %s: field %s is not documented (a row | `%s` | ...)", c.heading, join(c.path, f), f)
			}
		}
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
