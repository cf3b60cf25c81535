// Command histgen writes a large history for the projections' benchmarks:
// the Large cell of internal/history run for -events events.
//
//	go run ./internal/history/histgen -o projections/testdata/histories/large-1.jsonl.gz
package main
