// Package agentpb is the wire protocol between the corral master and the
// agent on each machine, generated from agent.proto: the Agent service the
// master polls and the Master service agents register with.
//
// Regenerate with `make proto` after editing agent.proto; the generated files
// are committed, and `make verify` fails when they are stale.
package agentpb
