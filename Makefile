# corral: `make test` is what CI runs (see .ci/run).
GO      ?= go
PKGS    ?= ./...
# -race everywhere: the budget allows it on the CI machine (2 cores).
TESTFLAGS ?= -race -count=1 -timeout 25m

.PHONY: test vet fmt-check test-only bench bench-events soak proto build tidy-check

test: vet fmt-check test-only

vet:
	$(GO) vet $(PKGS)

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

test-only:
	$(GO) test $(TESTFLAGS) $(PKGS)

build:
	$(GO) build -o bin/corral ./cmd/corral

# Benchmarks whose figures the README's Performance section quotes. Each runs
# several times so the median can be taken on a noisy machine.
BENCHCOUNT ?= 5
bench:
	$(GO) test -run '^$$' -bench . -benchtime 2s -count $(BENCHCOUNT) ./events/ ./projections/ ./commands/ ./scheduler/ ./infrastore/ ./agent/...

bench-events:
	$(GO) test -run '^$$' -bench . -benchtime 2s -count $(BENCHCOUNT) ./events/

# Regenerate protobuf code (needs protoc, protoc-gen-go, protoc-gen-go-grpc).
proto:
	cd events && protoc --go_out=. --go_opt=paths=source_relative catalogue.proto
	cd commands/apipb && protoc -I . -I ../../events --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative api.proto
	cd agent/agentpb && protoc -I . -I ../../events --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative agent.proto
