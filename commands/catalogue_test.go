package commands_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/corralhq/corral/commands"
)

// TestNamesAreEveryCommand: Names lists exactly the types that have a
// decide method in this package.
func TestNamesAreEveryCommand(t *testing.T) {
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var decided []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || fn.Name.Name != "decide" {
				continue
			}
			typ := fn.Recv.List[0].Type
			if star, ok := typ.(*ast.StarExpr); ok {
				typ = star.X
			}
			decided = append(decided, typ.(*ast.Ident).Name)
		}
	}
	slices.Sort(decided)
	names := slices.Clone(commands.Names())
	slices.Sort(names)
	if !slices.Equal(decided, names) {
		t.Fatalf("commands.Names() = %v, the types with a decide method are %v", names, decided)
	}
	if got := commands.Name(commands.SubmitJob{}); got != "SubmitJob" {
		t.Fatalf("Name(SubmitJob{}) = %q", got)
	}
}
