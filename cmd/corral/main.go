package main

import (
	"context"
	"os"

	"github.com/corralhq/corral/cmd/corral/internal/cli"
	"github.com/corralhq/corral/cmd/corral/internal/infrastoreapi"
)

func main() {
	os.Exit(cli.Main(context.Background(), os.Args[1:], cli.Env{
		Stdout: os.Stdout,
		Stderr: os.Stderr,
		OpenInfra: func(ctx context.Context, path string, o cli.InfraOptions) (cli.Infra, error) {
			return infrastoreapi.Open(ctx, path, infrastoreapi.Options{ReadOnly: o.ReadOnly, Cell: o.Cell, MemoryLimit: o.MemoryLimit,
				Threads: o.Threads, MaxRows: o.MaxRows, MaxResultBytes: o.MaxResultBytes, QueryTimeout: o.QueryTimeout, MemoryBudget: o.MemoryBudget})
		},
	}))
}
