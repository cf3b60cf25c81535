package jobfile

import (
	"os"
	"strings"
	"testing"
)

// TestJobFileReferenceCoversAllocSets: docs/jobfile.md documents every
// field of an alloc set in a bundle (the job fields are held to it by the
// commands package's test).
func TestJobFileReferenceCoversAllocSets(t *testing.T) {
	doc, err := os.ReadFile("../../../../docs/jobfile.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## An alloc set")
	if !ok {
		t.Fatal("docs/jobfile.md has no section on alloc sets")
	}
	if i := strings.Index(section, "\n#"); i >= 0 {
		section = section[:i]
	}
	for _, k := range allocSetKeys {
		if !strings.Contains(section, "| `"+k+"` |") {
			t.Errorf("docs/jobfile.md: alloc set field %s is not documented", k)
		}
	}
}
