package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestSplitCellsKeepsEscapedPipes(t *testing.T) {
	got := splitCells("| replay | <= 3 s | `go test -bench 'Replay\\|StateAt' ./projections/` |")
	want := []string{"replay", "<= 3 s", "`go test -bench 'Replay|StateAt' ./projections/`"}
	if strings.Join(got, "¦") != strings.Join(want, "¦") {
		t.Errorf("splitCells = %q, want %q", got, want)
	}
}

func TestPerformanceRows(t *testing.T) {
	readme := "# x\n\n## Performance\n\ntext\n\n| figure | target | measured | command |\n| --- | --- | --- | --- |\n" +
		"| a | 1 | 2 | `go test -run '^$' -bench A ./events/` |\n" +
		"| a, SQLite | 1 | 2 | same (`p99-ms` of `batch=1`) |\n" +
		"| b | | 3 | `CORRAL_X=1 go test -bench B ./infrastore/` (the `peak-RSS-MiB` column); `make bench-sim` (`GOOGLE_SHARE=0.25` for a quarter) |\n" +
		"| c | | 4 | `go test -run '^$' -bench A ./events/` |\n\nafter\n\n| other | table |\n|---|---|\n| x | `go test ./nothing/` |\n\n## Next\n"
	rows, err := PerformanceRows(readme)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows {
		got = append(got, r.Figure+": "+strings.Join(r.Commands, " ; "))
	}
	want := []string{
		"a: go test -run '^$' -bench A ./events/",
		"a, SQLite: ",
		"b: CORRAL_X=1 go test -bench B ./infrastore/ ; make bench-sim",
		"c: ",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if _, err := PerformanceRows("# no section\n"); err == nil {
		t.Error("a README without a Performance section parsed")
	}
}

// TestTheREADMEsCommandsName what exists: every go test command's packages,
// benchmarks and tests, and every make target. A renamed benchmark or a
// moved package fails here, in make test, and not only in a make bench
// run hours long.
func TestTheREADMEsCommandsNameWhatExists(t *testing.T) {
	root := filepath.Join("..", "..")
	text, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := PerformanceRows(string(text))
	if err != nil {
		t.Fatal(err)
	}
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	commands := 0
	for _, r := range rows {
		for _, c := range r.Commands {
			commands++
			t.Run(c, func(t *testing.T) { checkCommand(t, root, string(makefile), c) })
		}
	}
	if commands < 20 {
		t.Errorf("the Performance table gave %d commands; it holds more than 20", commands)
	}
}

func checkCommand(t *testing.T, root, makefile, command string) {
	words := shellWords(command)
	dir := root
	for len(words) > 2 && words[0] == "cd" && words[2] == "&&" {
		dir = filepath.Join(dir, words[1])
		words = words[3:]
	}
	for len(words) > 0 && regexp.MustCompile(`^[A-Z_][A-Z0-9_]*=`).MatchString(words[0]) {
		words = words[1:]
	}
	switch {
	case len(words) >= 2 && words[0] == "make":
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(words[1]) + `:`).MatchString(makefile) {
			t.Errorf("make %s: no such target in the Makefile", words[1])
		}
	case len(words) >= 2 && words[0] == "go" && words[1] == "test":
		var pkgs []string
		var bench, run string
		for i := 2; i < len(words); i++ {
			switch w := words[i]; {
			case w == "-bench" && i+1 < len(words):
				bench, i = words[i+1], i+1
			case w == "-run" && i+1 < len(words):
				run, i = words[i+1], i+1
			case strings.HasPrefix(w, "-"):
				if !strings.Contains(w, "=") && i+1 < len(words) && !strings.HasPrefix(words[i+1], "-") && !strings.HasPrefix(words[i+1], "./") {
					i++ // a flag's value
				}
			case strings.HasPrefix(w, "./"):
				pkgs = append(pkgs, filepath.Join(dir, w))
			}
		}
		if len(pkgs) == 0 {
			t.Fatalf("names no package")
		}
		for _, pkg := range pkgs {
			src := testSources(t, pkg)
			if bench != "" && !definesMatching(src, "Benchmark", bench) {
				t.Errorf("%s defines no benchmark -bench %s selects", pkg, bench)
			}
			if run != "" && bench == "" && !definesMatching(src, "Test", run) {
				t.Errorf("%s defines no test -run %s selects", pkg, run)
			}
		}
	default:
		t.Errorf("neither go test nor make")
	}
}

// testSources is the text of a package's test files.
func testSources(t *testing.T, pkg string) string {
	files, err := filepath.Glob(filepath.Join(pkg, "*_test.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("%s: no test files (%v)", pkg, err)
	}
	var all strings.Builder
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		all.Write(b)
	}
	return all.String()
}

// definesMatching reports whether src declares a top-level function of the
// kind (Test, Benchmark) whose name the -run or -bench pattern's first
// element matches, as go test matches it.
func definesMatching(src, kind, pattern string) bool {
	top := strings.SplitN(pattern, "/", 2)[0]
	re, err := regexp.Compile(top)
	if err != nil {
		return false
	}
	for _, m := range regexp.MustCompile(`(?m)^func (`+kind+`\w*)\(`).FindAllStringSubmatch(src, -1) {
		if re.MatchString(m[1]) {
			return true
		}
	}
	return false
}

// shellWords splits a command at spaces outside single quotes, as bash
// would for the commands the table holds.
func shellWords(s string) []string {
	var words []string
	var w strings.Builder
	quoted, inWord := false, false
	for _, r := range s {
		switch {
		case r == '\'':
			quoted, inWord = !quoted, true
		case r == ' ' && !quoted:
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words
}
