package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Package is what the check reads of one package of `go list -json -test`:
// the package itself, or its test variant (which holds its tests' imports).
type Package struct {
	ImportPath   string
	Dir          string
	ForTest      string
	Imports      []string
	GoFiles      []string
	TestGoFiles  []string
	XTestGoFiles []string
}

// Violation is one import the table does not allow.
type Violation struct {
	File     string // module-relative; the package's directory when no file is found
	Importer string // the importing package, module-relative
	Imported string
	Test     bool
	Why      string
}

func (v Violation) String() string {
	return fmt.Sprintf("%s: %s imports %s: %s", v.File, v.Importer, v.Imported, v.Why)
}

// List runs `go list -json -test ./...` in dir and returns its packages.
func List(dir string) ([]Package, error) {
	cmd := exec.Command("go", "list", "-e", "-json", "-test", "./...")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list in %s: %w: %s", dir, err, stderr.String())
	}
	var pkgs []Package
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p Package
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			return pkgs, nil
		} else if err != nil {
			return nil, fmt.Errorf("reading go list's output: %w", err)
		}
		pkgs = append(pkgs, p)
	}
}

// basePath strips what go list adds to a test variant's path: " [p.test]"
// and an external test package's "_test".
func basePath(p string) string {
	p, _, _ = strings.Cut(p, " ")
	return strings.TrimSuffix(p, "_test")
}

// partOf returns the part a module-relative package path belongs to.
func partOf(rel string) (Part, bool) {
	var best Part
	n := -1
	for _, part := range Parts {
		for _, p := range part.Paths {
			if (rel == p || strings.HasPrefix(rel, p+"/")) && len(p) > n {
				best, n = part, len(p)
			}
		}
	}
	return best, n >= 0
}

// Check returns every import of pkgs (packages of module) that the table
// forbids, and every package no part holds.
func Check(module string, pkgs []Package) []Violation {
	var out []Violation
	seen := map[string]bool{}
	for _, p := range pkgs {
		if strings.HasSuffix(p.ImportPath, ".test") {
			continue // the generated test main
		}
		path := basePath(p.ImportPath)
		rel, ok := relative(module, path)
		if !ok {
			continue
		}
		test := p.ForTest != "" || strings.HasSuffix(strings.Fields(p.ImportPath)[0], "_test")
		from, ok := partOf(rel)
		if !ok {
			if !seen[rel] {
				seen[rel] = true
				out = append(out, Violation{File: rel, Importer: rel, Why: "no part holds this package: add it to a part in scripts/archcheck/rules.go"})
			}
			continue
		}
		for _, imp := range p.Imports {
			imp = basePath(imp)
			why := forbidden(module, from, imp, test)
			if why == "" {
				continue
			}
			key := rel + " " + imp
			if seen[key] {
				continue
			}
			seen[key] = true
			out = append(out, Violation{File: fileImporting(p, imp, module), Importer: rel, Imported: imp, Test: test, Why: why})
		}
	}
	slices.SortFunc(out, func(a, b Violation) int { return strings.Compare(a.String(), b.String()) })
	return out
}

func relative(module, path string) (string, bool) {
	if path == module {
		return ".", true
	}
	rel, ok := strings.CutPrefix(path, module+"/")
	return rel, ok
}

// forbidden says why from may not import imp ("" when it may).
func forbidden(module string, from Part, imp string, test bool) string {
	rel, inModule := relative(module, imp)
	if !inModule {
		for _, r := range Restricted {
			if (imp == r.Path || strings.HasPrefix(imp, r.Path+"/") || strings.HasPrefix(imp, r.Path+"-")) && !slices.Contains(r.Parts, from.Name) {
				return fmt.Sprintf("only %s may import %s: %s", strings.Join(r.Parts, " and "), r.Path, r.Why)
			}
		}
		return ""
	}
	to, ok := partOf(rel)
	if !ok || to.Name == from.Name || slices.Contains(from.Imports, to.Name) {
		return "" // an unplaced package is reported once, as itself
	}
	if to.Kit && (test || from.Kit) {
		return ""
	}
	allowed := "nothing of corral's"
	if len(from.Imports) > 0 {
		allowed = strings.Join(from.Imports, ", ")
	}
	if to.Kit {
		return fmt.Sprintf("%s is a test kit: only tests, kits and tools import it", rel)
	}
	return fmt.Sprintf("the part %s imports %s (and, in tests, the test kits), not %s (part %s)", from.Name, allowed, rel, to.Name)
}

// fileImporting names the file of p that imports imp, so that a violation
// points at the line to change.
func fileImporting(p Package, imp, module string) string {
	files := p.GoFiles
	if p.ForTest != "" || strings.HasSuffix(strings.Fields(p.ImportPath)[0], "_test") {
		files = append(append(slices.Clone(files), p.TestGoFiles...), p.XTestGoFiles...)
	}
	rel, _ := relative(module, basePath(p.ImportPath))
	for _, f := range files {
		ast, err := parser.ParseFile(token.NewFileSet(), filepath.Join(p.Dir, f), nil, parser.ImportsOnly)
		if err != nil {
			continue
		}
		for _, s := range ast.Imports {
			if v, err := strconv.Unquote(s.Path.Value); err == nil && v == imp {
				return filepath.ToSlash(filepath.Join(rel, f))
			}
		}
	}
	return rel
}
