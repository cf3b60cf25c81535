package main

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// A module laid out like corral's, with deliberate crossings: the check
// must name each, and only them.
func TestForbiddenImportsFail(t *testing.T) {
	const module = "github.com/corralhq/corral"
	dir := t.TempDir()
	files := map[string]string{
		"go.mod":                   "module " + module + "\n\ngo " + strings.TrimPrefix(runtime.Version(), "go") + "\n",
		"README.md":                "# corral\n\n" + tableBegin + Table() + tableEnd,
		"events/events.go":         "package events\n\nimport _ \"" + module + "/commands\"\n",
		"commands/commands.go":     "package commands\n\nimport _ \"" + module + "/internal/pgtest\"\n",
		"internal/pgtest/pg.go":    "package pgtest\n",
		"projections/fold.go":      "package projections\n\nimport _ \"" + module + "/events\"\n",
		"projections/fold_test.go": "package projections_test\n\nimport _ \"" + module + "/commands\"\n",
		"infrastore/tables.go":     "package infrastore\n\nimport _ \"" + module + "/projections\"\n",
		"infrastore/kit_test.go":   "package infrastore\n\nimport _ \"" + module + "/internal/pgtest\"\n",
		"elsewhere/new.go":         "package elsewhere\n",
	}
	for name, text := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pkgs, err := List(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range Check(module, pkgs) {
		got = append(got, v.File+" -> "+v.Imported)
	}
	want := []string{
		"commands/commands.go -> " + module + "/internal/pgtest", // a kit in production code
		"elsewhere -> ", // in no part
		"events/events.go -> " + module + "/commands",         // upwards
		"projections/fold_test.go -> " + module + "/commands", // a test crossing layers
	}
	if !slices.Equal(got, want) {
		t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if err := run(dir, false); err == nil || !strings.Contains(err.Error(), "4 problems") {
		t.Errorf("run = %v, want it to fail with the 4 problems", err)
	}
}

// Parts are listed lowest first: each imports only parts listed before it,
// so the table has no cycle, and every name it uses is a part.
func TestPartsAreLayered(t *testing.T) {
	seen := map[string]bool{}
	paths := map[string]string{}
	for _, p := range Parts {
		for _, imp := range p.Imports {
			if !seen[imp] {
				t.Errorf("part %s imports %q, which is not a part listed before it", p.Name, imp)
			}
		}
		for _, x := range p.Paths {
			if other, dup := paths[x]; dup {
				t.Errorf("path %s is in both %s and %s", x, other, p.Name)
			}
			paths[x] = p.Name
		}
		seen[p.Name] = true
	}
}

// The README carries the table between its markers; without them the
// check says so rather than passing.
func TestReadmeTableNeedsMarkers(t *testing.T) {
	if _, err := replaceTable([]byte("# corral\n"), Table()); err == nil {
		t.Error("a README without markers was accepted")
	}
	got, err := replaceTable([]byte("a\n"+tableBegin+"old\n"+tableEnd+"b\n"), Table())
	if err != nil || string(got) != "a\n"+tableBegin+Table()+tableEnd+"b\n" {
		t.Errorf("replaceTable = %q, %v", got, err)
	}
}
