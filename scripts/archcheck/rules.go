package main

// The architecture: every package of the module belongs to one part (the
// longest prefix of its path among the parts' Paths), and a part's code
// imports only the parts it lists. This table is the one statement of it:
// `make verify` checks the module against it, and the README's table of
// parts is generated from it (-readme).

// Part is one layer of corral.
type Part struct {
	Name string
	// Paths are module-relative package paths; a package belongs to the
	// part with the longest one that is it or an ancestor of it.
	Paths []string
	// Owns says what the part is for, as the README shows it.
	Owns string
	// Imports are the parts its code may import besides its own. Tests may
	// import these and every Kit part too.
	Imports []string
	// Kit marks test kits: only tests, other kits and tools import them,
	// so no binary links them.
	Kit bool
}

// Parts, lowest first: a part imports only parts above it in this list.
var Parts = []Part{
	{Name: "events", Paths: []string{"events", "migrations"},
		Owns: "the log: event types, codec, `Store` and its backends, the feed, the vocabulary every layer shares (bands, label syntax, limits), the schema"},
	{Name: "projections", Paths: []string{"projections"}, Imports: []string{"events"},
		Owns: "the cell state folded from events, checkpoints, state at time T"},
	{Name: "scheduler", Paths: []string{"scheduler"}, Imports: []string{"events"},
		Owns: "the pure scheduling pass, the Google trace reader, the workloads and compaction harness"},
	{Name: "agent", Paths: []string{"agent"}, Imports: []string{"events"},
		Owns: "the machine's agent: tasks in cgroups, the task lifecycle, its protocol"},
	{Name: "commands", Paths: []string{"commands"}, Imports: []string{"events", "projections", "scheduler", "agent"},
		Owns: "Decide, the writer, the agent link, authorization, the replica and its gRPC API, the client, DNS"},
	{Name: "fauxmaster", Paths: []string{"fauxmaster"}, Imports: []string{"events", "projections", "scheduler", "commands"},
		Owns: "what-if replays of a window of the log (or the Google trace) through the cell's own code"},
	{Name: "operations", Paths: []string{"commands/webui", "commands/ops"}, Imports: []string{"events", "projections", "scheduler", "agent", "commands", "fauxmaster"},
		Owns: "the web UI (its `/sim` page replays through the Fauxmaster), metrics, health, the doctor"},
	{Name: "infrastore", Paths: []string{"infrastore"}, Imports: []string{"events", "projections"},
		Owns: "DuckDB: the log's tables, SQL, billing; with cmd the only importer of DuckDB"},
	{Name: "cmd", Paths: []string{"cmd"}, Imports: []string{"events", "projections", "scheduler", "agent", "commands", "fauxmaster", "operations", "infrastore"},
		Owns: "the one binary, `corral`"},
	{Name: "test kits", Paths: []string{"internal", "events/storetest", "events/golden", "commands/commandtest", "commands/api/apitest", "agent/agentsim"}, Kit: true,
		Imports: []string{"events", "projections", "scheduler", "agent", "commands", "fauxmaster", "operations", "infrastore"},
		Owns:    "what tests share: real PostgreSQL (`internal/pgtest`), the store conformance suite, golden histories and their generator, the cell simulation, simulated agents"},
	{Name: "tools", Paths: []string{"scripts", "tools"},
		Imports: []string{"events", "projections", "scheduler", "agent", "commands", "fauxmaster", "operations", "infrastore", "test kits"},
		Owns:    "this check and the repository's other tools (`tools/kubepack` is a module of its own)"},
}

// Restricted are imports outside the module that only some parts may make
// (their tests included): linking DuckDB costs 30-60 s per binary.
var Restricted = []struct {
	Path  string
	Parts []string
	Why   string
}{
	{"github.com/duckdb/duckdb-go", []string{"infrastore", "cmd"}, "linking DuckDB costs 30-60 s per binary"},
}
