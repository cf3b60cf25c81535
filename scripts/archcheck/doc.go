// Command archcheck checks corral's architecture: which parts of the module
// may import which (rules.go, the one statement of it), tests included, as
// `go list -json -test` reports their imports; that no package is outside
// every part; and that the README's table of parts is the one rules.go
// renders. `make verify` runs it from the repository's top.
//
//	go run ./scripts/archcheck            check; exit 1 naming each forbidden import
//	go run ./scripts/archcheck -readme    rewrite the README's table from rules.go
//	go run ./scripts/archcheck -kits      print the test kits' paths as patterns
//	                                      (scripts/deadcode-check allows code only tests reach there)
package main
