# corral: `make test` is what CI runs (see .ci/run).
GO      ?= go
PKGS    ?= ./...
# -race everywhere: the budget allows it on the CI machine (2 cores).
TESTFLAGS ?= -race -count=1 -timeout 25m

.PHONY: test-kubepack kubepack
.PHONY: help check test test-deps verify vet fmt-check staticcheck tidy-check proto-check deadcode arch-check test-only bench bench-events bench-sim borg-experiments google-replay soak proto build restart-load

# help lists the targets with the line that describes each (a "## " comment
# after the target's name).
help: ## list the targets
	@grep -E '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/^([a-zA-Z_-]+):.*## (.*)/\1\t\2/' | expand -t 18

# The loop for a change of a few minutes: everything verify checks (two at a
# time), then every package's tests with -short (the long scenarios,
# fuzzing, the kubepack harness and -race are make test's). go test's cache
# stands: a change re-runs the packages it reaches, not the whole tree
# (make test runs everything with -count=1).
check: ## verify, then go test -short ./... (minutes; make test is CI's whole run)
	$(MAKE) --no-print-directory -j2 fmt-check vet staticcheck tidy-check proto-check deadcode arch-check
	$(GO) test -short $(PKGS)

# Besides Go, make test needs protoc, Chromium, the PostgreSQL server
# binaries (each test binary starts its own server from them: no server
# need run) and docker-compose; test-deps names what is missing and the
# Debian packages that bring it (.ci/run installs them).
test: test-deps verify test-only fuzz-short test-kubepack ## what CI runs: verify, every test with -race, the fuzzers, kubepack

test-deps: ## name what make test needs and is missing
	scripts/test-deps

# Everything short of running the tests: formatting, vet, staticcheck, go.mod
# tidy, generated code up to date, no code that only tests reach outside
# scripts/deadcode-allow (a twin of shipped logic, or dead), and the
# architecture: imports between the parts, tests included, as
# scripts/archcheck/rules.go allows them (and the README's table of parts
# generated from it). The tools are pinned in go.mod.
verify: fmt-check vet staticcheck tidy-check proto-check deadcode arch-check ## gofmt, vet, staticcheck, tidy, protos, deadcode, architecture

vet: ## go vet
	$(GO) vet $(PKGS)

fmt-check: ## gofmt -l is empty
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

staticcheck: ## staticcheck
	$(GO) tool staticcheck $(PKGS)

tidy-check: ## go.mod is tidy
	$(GO) mod tidy -diff

proto-check: ## generated protobuf code is current
	scripts/protogen --check

deadcode: ## code only tests reach (scripts/deadcode-check)
	scripts/deadcode-check

arch-check: ## imports between the parts as scripts/archcheck/rules.go allows
	$(GO) run ./scripts/archcheck

test-only: ## every test with -race
	$(GO) test $(TESTFLAGS) $(PKGS)

build: ## build bin/corral
	$(GO) build -o bin/corral ./cmd/corral

# A `corral up` with RESTART_TASKS small tasks and a 3-replica service,
# killed with SIGKILL and started again on a host loaded to twice its
# cores: no machine down, no task lost, at least 2 replicas answering
# throughout (make test runs it at 1,500). Each task reserves 1m of CPU and
# 4 MiB; when they need more than this host has, the test has each machine
# offer more (corral up --machine-cpu, --machine-memory). About 16 minutes
# on 2 cores.
RESTART_TASKS ?= 10000
restart-load: ## a corral up under load killed and restarted
	cd cmd/corral && CORRAL_RESTART_TASKS=$(RESTART_TASKS) $(GO) test -count=1 -timeout 30m -v -run 'TestRestartUnderLoadKeepsServicesUp$$' .

# The kube-scheduler harness (tools/kubepack) is a module of its own, so
# that corral's module does not carry Kubernetes: vetted and tested here,
# without -race (Kubernetes takes minutes to build with it, and the
# harness's own code is the fake API server's few reactors).
test-kubepack: ## vet and test tools/kubepack
	cd tools/kubepack && $(GO) vet ./... && $(GO) test -count=1 -timeout 10m ./...

# kube-scheduler v1.36 packing a workload on the machine prefixes corral's
# compaction keeps (the README's "Cell compaction"). One packing of
# synthetic-10k takes 5-19 minutes here, of OpenB under a minute.
KUBEPACK ?= -workload openb -machines 1523 -profile default,binpack
kubepack: ## kube-scheduler packing a workload
	cd tools/kubepack && $(GO) run . $(KUBEPACK)

# The README's Performance table run as written: every row's command, in
# order (hours: it includes the whole Google trace's replay and a rebuild of
# 10,000,000 events). ROWS='regexp' keeps the rows whose figure matches;
# scripts/readmebench -list prints the commands.
ROWS ?=
bench: ## every row of the README's Performance table, as written (ROWS=regexp for some)
	$(GO) run ./scripts/readmebench -rows '$(ROWS)'

# A week of a 1,000-machine cell replayed by the Fauxmaster (corral sim).
bench-sim: ## a week of a 1,000-machine cell replayed
	$(GO) test -run '^$$' -bench ReplayWeek -benchtime 1x -count 3 -timeout 30m ./fauxmaster/

# The Borg paper's §5 experiments on the whole Google trace cell (make test
# runs a 1% sample): policies, segregated prod and non-prod, bucketed
# requests, 11 seeds each.
borg-experiments: ## the Borg paper section 5 experiments
	$(GO) test ./scheduler/workload/ -run TestBorgExperiments -borg.share 1 -borg.seeds 11 -timeout 4h -v -count=1

# The Google trace's seven hours replayed through corral as a cell: the
# whole cell (12,583 machines, about 14 minutes here; GOOGLE_SHARE=0.25 for
# a quarter, 50 s); make test replays a 2% slice.
GOOGLE_SHARE ?= 1
google-replay: ## the Google trace replayed as a cell
	$(GO) test ./fauxmaster/ -run TestGoogleTraceReplay -google.share $(GOOGLE_SHARE) -timeout 6h -v -count=1

bench-events: ## the events benchmarks
	$(GO) test -run '^$$' -bench . -benchtime 2s -count 5 ./events/

# Regenerate protobuf code (needs protoc; the plugins are built at the
# versions go.mod pins).
proto: ## regenerate the protobuf code
	scripts/protogen

# A short run of every fuzzer (their seed corpora under testdata/fuzz run in
# every go test). A failing input is written to the package's
# testdata/fuzz/<Fuzzer>/ and the run stops. Budgets are execution counts,
# sized to a few seconds each: a wall-clock -fuzztime can fail with a bare
# "context deadline exceeded" when it expires mid-input (a race in Go's fuzz
# coordinator, go.dev/issue/75804, unfixed in Go 1.26). FUZZSCALE multiplies
# them for a longer run.
FUZZSCALE ?= 1
FUZZERS  ?= ./commands/:FuzzDecodeSpec:20000 ./commands/:FuzzAdmission:10000 ./events/:FuzzDecode:50000 ./projections/:FuzzDecodeState:20000 \
            ./commands/auth/:FuzzSubmitRequest:1000 ./cmd/corral/:FuzzJobFile:2000 ./infrastore/:FuzzQueryGuard:500
.PHONY: fuzz-short
fuzz-short: ## a short run of every fuzzer
	@set -e; for f in $(FUZZERS); do pkg=$${f%%:*}; rest=$${f#*:}; name=$${rest%%:*}; n=$$(( $${rest##*:} * $(FUZZSCALE) )); \
		echo "fuzz $$name in $$pkg for $${n} executions"; \
		$(GO) test -run '^$$' -fuzz "^$$name$$" -fuzztime $${n}x $$pkg; done

# A long run: every fuzzer at 50 times its budget, then the whole-cell
# simulation over as many seeds as fit in SOAKTIME.
SOAKTIME ?= 10m
soak: ## long fuzzing and simulation
	$(MAKE) fuzz-short FUZZSCALE=50
	$(GO) test -run '^TestSim$$' -count=1 -timeout 0 ./internal/cellsim/ -sim.budget $(SOAKTIME) -v
