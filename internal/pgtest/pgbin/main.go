package main

import (
	"fmt"
	"os"

	"github.com/corralhq/corral/internal/pgtest"
)

func main() {
	dir, err := pgtest.FindBinaries()
	if err != nil {
		fmt.Println(err) // on stdout, for scripts/test-deps to quote
		os.Exit(1)
	}
	fmt.Println(dir)
}
