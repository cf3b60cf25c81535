// Package agentpb is the wire protocol between the corral master and the
// agent on each machine, generated from agent.proto: the Agent service the
// master polls and the Master service agents register with.
//
// Regenerate with go generate after editing agent.proto; the generated files
// are committed.
package agentpb

//go:generate protoc -I . -I ../../events --go_out=. --go_opt=paths=source_relative --go_opt=Mcatalogue.proto=github.com/corralhq/corral/events --go-grpc_out=. --go-grpc_opt=paths=source_relative --go-grpc_opt=Mcatalogue.proto=github.com/corralhq/corral/events agent.proto
