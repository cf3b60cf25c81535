# corral: `make test` is what CI runs (see .ci/run).
GO      ?= go
PKGS    ?= ./...
# -race everywhere: the budget allows it on the CI machine (2 cores).
TESTFLAGS ?= -race -count=1 -timeout 25m

.PHONY: test vet fmt-check test-only bench bench-events soak proto build tidy-check

test: vet fmt-check test-only fuzz-short

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

# A short run of every fuzzer, FUZZTIME each (their seed corpora under
# testdata/fuzz run in every go test). A failing input is written to the
# package's testdata/fuzz/<Fuzzer>/ and the run stops.
FUZZTIME ?= 5s
FUZZERS  ?= ./commands/:FuzzDecodeSpec ./events/:FuzzDecode ./projections/:FuzzDecodeState \
            ./commands/auth/:FuzzSubmitRequest ./cmd/corral/:FuzzJobFile ./infrastore/:FuzzQueryGuard
.PHONY: fuzz-short
fuzz-short:
	@set -e; for f in $(FUZZERS); do pkg=$${f%%:*}; name=$${f##*:}; \
		echo "fuzz $$name in $$pkg for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$$name$$" -fuzztime $(FUZZTIME) $$pkg; done
