package main

import (
	"flag"
	"fmt"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/tools/go/callgraph"
	"golang.org/x/tools/go/callgraph/rta"
	"golang.org/x/tools/go/packages"
	"golang.org/x/tools/go/ssa"
	"golang.org/x/tools/go/ssa/ssautil"
)

func main() {
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: reflectonly [packages]  (default ./...)")
	}
	flag.Parse()
	patterns := flag.Args()
	if len(patterns) == 0 {
		patterns = []string{"./..."}
	}
	lines, err := run(patterns)
	if err != nil {
		fmt.Fprintln(os.Stderr, "reflectonly:", err)
		os.Exit(2)
	}
	for _, l := range lines {
		fmt.Println(l)
	}
}

func run(patterns []string) ([]string, error) {
	cfg := &packages.Config{Mode: packages.LoadAllSyntax | packages.NeedModule}
	pkgs, err := packages.Load(cfg, patterns...)
	if err != nil {
		return nil, err
	}
	if packages.PrintErrors(pkgs) > 0 {
		return nil, fmt.Errorf("packages contain errors")
	}
	var module string
	for _, p := range pkgs {
		if p.Module != nil && p.Module.Main {
			module = p.Module.Path
			break
		}
	}
	if module == "" {
		return nil, fmt.Errorf("no package of the main module in %v", patterns)
	}
	prog, ssaPkgs := ssautil.AllPackages(pkgs, ssa.InstantiateGenerics)
	prog.Build()

	// The roots are what deadcode starts from: every main package's main
	// and init.
	var roots []*ssa.Function
	for _, p := range ssautil.MainPackages(ssaPkgs) {
		roots = append(roots, p.Func("main"), p.Func("init"))
	}
	if len(roots) == 0 {
		return nil, fmt.Errorf("no main package in %v", patterns)
	}
	res := rta.Analyze(roots, true)

	wd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	var out []string
	for fn := range res.Reachable {
		if !reflectionOnly(fn, res, module) {
			continue
		}
		pos := prog.Fset.Position(fn.Pos())
		out = append(out, fmt.Sprintf("%s: reached only by reflection: %s", relative(wd, pos), methodName(fn)))
	}
	slices.Sort(out)
	return out, nil
}

// reflectionOnly: fn is an exported method of the module, written by hand,
// and no call reaches it (every call, static, through an interface or
// through a func value, is an edge in the graph rta builds; reflection is
// the one way in it adds without one).
func reflectionOnly(fn *ssa.Function, res *rta.Result, module string) bool {
	recv := fn.Signature.Recv()
	if recv == nil || fn.Synthetic != "" || fn.Object() == nil || !fn.Object().Exported() || fn.Pkg == nil {
		return false
	}
	path := fn.Pkg.Pkg.Path()
	if path != module && !strings.HasPrefix(path, module+"/") {
		return false
	}
	if f := fn.Prog.Fset.File(fn.Pos()); f == nil || strings.HasSuffix(f.Name(), ".pb.go") {
		return false
	}
	node := res.CallGraph.Nodes[fn]
	return node == nil || !called(node, map[*callgraph.Node]bool{})
}

// called reports whether some call reaches node: a call from hand-written
// code, or from a wrapper the compiler writes (the pointer receiver's
// method of a value method) that is itself called. A wrapper nothing calls
// is reached by reflection too.
func called(node *callgraph.Node, seen map[*callgraph.Node]bool) bool {
	for _, e := range node.In {
		caller := e.Caller
		if caller.Func == nil || caller.Func.Synthetic == "" {
			return true
		}
		if !seen[caller] {
			seen[caller] = true
			if called(caller, seen) {
				return true
			}
		}
	}
	return false
}

// methodName prints a method as deadcode does: Type.Method.
func methodName(fn *ssa.Function) string {
	t := fn.Signature.Recv().Type()
	name := t.String()
	name = strings.TrimPrefix(name, "*")
	if i := strings.LastIndex(name, "."); i >= 0 {
		name = name[i+1:]
	}
	if i := strings.Index(name, "["); i >= 0 {
		name = name[:i]
	}
	return name + "." + fn.Name()
}

func relative(wd string, pos token.Position) string {
	if rel, err := filepath.Rel(wd, pos.Filename); err == nil && !strings.HasPrefix(rel, "..") {
		pos.Filename = rel
	}
	return pos.String()
}
