package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	write := flag.Bool("readme", false, "rewrite the README's table of parts from rules.go instead of checking")
	dir := flag.String("C", ".", "the repository's top")
	kits := flag.Bool("kits", false, "print a pattern per test kit path, ^path/, and exit")
	flag.Parse()
	if *kits {
		fmt.Print(KitPatterns())
		return
	}
	if err := run(*dir, *write); err != nil {
		fmt.Fprintln(os.Stderr, "archcheck:", err)
		os.Exit(1)
	}
}

func run(dir string, write bool) error {
	readme := filepath.Join(dir, "README.md")
	text, err := os.ReadFile(readme)
	if err != nil {
		return err
	}
	if write {
		out, err := replaceTable(text, Table())
		if err != nil {
			return err
		}
		return os.WriteFile(readme, out, 0o644)
	}
	module, err := modulePath(dir)
	if err != nil {
		return err
	}
	pkgs, err := List(dir)
	if err != nil {
		return err
	}
	var problems []string
	for _, v := range Check(module, pkgs) {
		problems = append(problems, v.String())
	}
	if want, err := replaceTable(text, Table()); err != nil {
		problems = append(problems, err.Error())
	} else if !bytes.Equal(want, text) {
		problems = append(problems, "README.md: the table of parts differs from scripts/archcheck/rules.go: run go run ./scripts/archcheck -readme")
	}
	if len(problems) > 0 {
		return fmt.Errorf("%d problems:\n%s", len(problems), strings.Join(problems, "\n"))
	}
	return nil
}

func modulePath(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if m, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.TrimSpace(m), nil
		}
	}
	return "", fmt.Errorf("go.mod: no module line")
}

const (
	tableBegin = "<!-- archcheck: begin (generated from scripts/archcheck/rules.go by go run ./scripts/archcheck -readme) -->\n"
	tableEnd   = "<!-- archcheck: end -->\n"
)

// KitPatterns are the test kits' paths, one ^path/ line each: code there
// is reached only from tests by design.
func KitPatterns() string {
	var b strings.Builder
	for _, p := range Parts {
		if p.Kit {
			for _, x := range p.Paths {
				fmt.Fprintf(&b, "^%s/\n", x)
			}
		}
	}
	return b.String()
}

// Table renders Parts as the README's markdown table.
func Table() string {
	var b strings.Builder
	b.WriteString("| part | packages | owns | may import (tests also: test kits) |\n| --- | --- | --- | --- |\n")
	for _, p := range Parts {
		paths := make([]string, len(p.Paths))
		for i, x := range p.Paths {
			paths[i] = "`" + x + "/`"
		}
		imports := "nothing of corral's"
		if len(p.Imports) > 0 {
			imports = strings.Join(p.Imports, ", ")
		}
		if p.Kit {
			imports += "; imported only by tests, kits and tools"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", p.Name, strings.Join(paths, ", "), p.Owns, imports)
	}
	for _, r := range Restricted {
		fmt.Fprintf(&b, "\nOnly %s import `%s` (%s).\n", strings.Join(r.Parts, " and "), r.Path, r.Why)
	}
	return b.String()
}

// replaceTable puts table between the README's markers.
func replaceTable(readme []byte, table string) ([]byte, error) {
	s := string(readme)
	i := strings.Index(s, tableBegin)
	j := strings.Index(s, tableEnd)
	if i < 0 || j < i {
		return nil, fmt.Errorf("README.md: no %q ... %q markers for the table of parts", strings.TrimSpace(tableBegin), strings.TrimSpace(tableEnd))
	}
	return []byte(s[:i+len(tableBegin)] + table + s[j:]), nil
}
