package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/corralhq/corral/events/golden"
	"github.com/corralhq/corral/internal/history"
)

func main() {
	out := flag.String("o", "", "the file to write")
	seed := flag.Uint64("seed", 1, "the cell's seed")
	n := flag.Int64("events", 1_000_000, "how many events")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "histgen: -o is required")
		os.Exit(2)
	}
	c := history.New(history.Large, *seed)
	c.Run(*n)
	// Written beside and renamed, so an interrupted run leaves no truncated
	// history for a benchmark to read.
	tmp := *out + ".partial"
	if err := golden.WriteFile(tmp, c.Log[:*n]); err != nil {
		fmt.Fprintln(os.Stderr, "histgen:", err)
		os.Exit(1)
	}
	if err := os.Rename(tmp, *out); err != nil {
		fmt.Fprintln(os.Stderr, "histgen:", err)
		os.Exit(1)
	}
}
