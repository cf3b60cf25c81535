package jobfile

import (
	"fmt"
	"path/filepath"
	"strings"

	jsonnet "github.com/google/go-jsonnet"
	yaml3 "gopkg.in/yaml.v3"
)

// confinedImporter resolves Jsonnet imports only inside roots (the job
// file's folder and the --jpath folders). A job file is data a user may
// have been handed: `importstr '/etc/shadow'` must not copy a file the
// CLI's user can read into a spec every user of the cell can read.
type confinedImporter struct {
	inner *jsonnet.FileImporter
	roots []string // absolute, symlinks resolved
}

func newConfinedImporter(path string, jpaths []string) *confinedImporter {
	dirs := append([]string{filepath.Dir(path)}, jpaths...)
	ci := &confinedImporter{inner: &jsonnet.FileImporter{JPaths: dirs}}
	for _, d := range dirs {
		if r, err := realPath(d); err == nil {
			ci.roots = append(ci.roots, r)
		}
	}
	return ci
}

func realPath(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(abs)
}

// Import finds the file as Jsonnet would, then refuses it unless its real
// path (after symlinks) lies under a root.
func (ci *confinedImporter) Import(importedFrom, importedPath string) (jsonnet.Contents, string, error) {
	contents, foundAt, err := ci.inner.Import(importedFrom, importedPath)
	if err != nil {
		return contents, foundAt, err
	}
	real, err := realPath(foundAt)
	if err != nil {
		return jsonnet.Contents{}, "", fmt.Errorf("import %q: %v", importedPath, err)
	}
	for _, r := range ci.roots {
		if real == r || strings.HasPrefix(real, r+string(filepath.Separator)) {
			return contents, foundAt, nil
		}
	}
	return jsonnet.Contents{}, "", fmt.Errorf("import %q resolves to %s, outside the job file's folder and the --jpath folders: imports may only read files under those", importedPath, real)
}

// duplicateKeys reports every mapping key written twice in a YAML or JSON
// document, at the line of its second use. YAML parsers keep the last
// value silently, which hides a typo's effect from the person who wrote
// the file.
func duplicateKeys(n *yaml3.Node) []Problem {
	if n == nil {
		return nil
	}
	var out []Problem
	if n.Kind == yaml3.MappingNode {
		seen := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind == yaml3.ScalarNode && k.Tag != "!!merge" {
				if first, ok := seen[k.Value]; ok {
					out = append(out, Problem{Line: k.Line, Field: k.Value, Reason: fmt.Sprintf("written twice (first at line %d): remove one", first)})
				} else {
					seen[k.Value] = k.Line
				}
			}
		}
	}
	for _, c := range n.Content {
		out = append(out, duplicateKeys(c)...)
	}
	return out
}
