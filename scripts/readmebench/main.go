package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"regexp"
)

func main() {
	readme := flag.String("readme", "README.md", "the README whose Performance table to run")
	list := flag.Bool("list", false, "print the commands, run nothing")
	rows := flag.String("rows", "", "run only the rows whose figure matches this regular expression")
	flag.Parse()
	if err := run(*readme, *list, *rows); err != nil {
		fmt.Fprintln(os.Stderr, "readmebench:", err)
		os.Exit(1)
	}
}

func run(readme string, list bool, rowsPattern string) error {
	text, err := os.ReadFile(readme)
	if err != nil {
		return err
	}
	rows, err := PerformanceRows(string(text))
	if err != nil {
		return err
	}
	var keep *regexp.Regexp
	if rowsPattern != "" {
		if keep, err = regexp.Compile(rowsPattern); err != nil {
			return fmt.Errorf("-rows: %v", err)
		}
	}
	var failed []string
	for _, r := range rows {
		if keep != nil && !keep.MatchString(r.Figure) {
			continue
		}
		for _, c := range r.Commands {
			fmt.Printf("== %s\n$ %s\n", r.Figure, c)
			if list {
				continue
			}
			cmd := exec.Command("bash", "-c", c)
			cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
			if err := cmd.Run(); err != nil {
				failed = append(failed, fmt.Sprintf("%s: %v", c, err))
			}
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d commands failed:\n%s", len(failed), joinLines(failed))
	}
	return nil
}

func joinLines(lines []string) string {
	out := ""
	for _, l := range lines {
		out += "  " + l + "\n"
	}
	return out
}
