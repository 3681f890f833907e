# idletrace — see README.md. Quick start: `make demo`, `make test`.
GO        ?= go
CLANG     ?= clang-19
STRIP     ?= llvm-strip-19
VERSION   ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -s -w -X main.version=$(VERSION)
BIN       := bin/idletrace

.PHONY: build generate check-generated deps-test deps-duckdb deps-idlestat test test-short test-race tidy-check lint staticcheck test-kernels test-lab demo bench fuzz vet clean deps-generate

build: ## static binary in bin/idletrace (needs only Go: BPF objects are committed)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/idletrace

deps-generate: ## Debian packages `make generate` needs
	@command -v $(CLANG) >/dev/null && command -v $(STRIP) >/dev/null && test -f /usr/include/bpf/bpf_helpers.h || \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang-19 llvm-19 libbpf-dev linux-libc-dev >/dev/null; }

generate: deps-generate ## rebuild bpf/idletrace_bpfel.{go,o} from bpf/idletrace.bpf.c
	BPF_CLANG=$(CLANG) BPF_STRIP=$(STRIP) $(GO) generate ./bpf/

check-generated: generate ## fail if the committed BPF output is not what the sources produce
	@git diff --exit-code -- bpf/ || { echo "generated files are not up to date: run 'make generate' and commit" >&2; exit 1; }

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }

# Without root, a plain `go test ./...` skips the tests that need it, each
# with a message naming what it needs; make test sets IDLETRACE_REQUIRE_ROOT=1,
# which makes them fail instead (internal/testenv).
deps-test: ## what make test needs that Go does not bring: chromium (the HTML report's browser test), DuckDB from npm (scripts/duckdb: the export tables' and fleet files' independent check), idlestat (the ftrace export's)
	@command -v chromium >/dev/null || \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }
	@$(MAKE) --no-print-directory deps-duckdb deps-idlestat

deps-duckdb: ## DuckDB from npm (scripts/duckdb), which pkg/export's TestDuckDB and pkg/fleet's TestFleetDuckDB need
	@test -d scripts/duckdb/node_modules/@duckdb/node-api || { \
	  command -v npm >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm >/dev/null; }; \
	  cd scripts/duckdb && npm ci --no-audit --no-fund --loglevel=error >/dev/null; }

deps-idlestat: ## Debian's idlestat, which cmd/idletrace's TestIdlestat runs on the ftrace export
	@command -v idlestat >/dev/null || \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq idlestat >/dev/null; }

# Two runs: the packages side by side without the recorder tests, then the
# recorder tests one package at a time, so that no CPU-bound test of another
# package keeps the CPUs from going idle under a recording (a referee run
# beside them once recorded 79 idle periods in its window).
test: build vet deps-test ## every test, kernel referee tests included (run as root: without root the root-only tests fail)
	IDLETRACE_REQUIRE_ROOT=1 $(GO) test -count=1 -timeout 20m -skip '^($(RECORDER_TESTS))$$' ./...
	IDLETRACE_REQUIRE_ROOT=1 $(GO) test -count=1 -timeout 20m -p 1 -run '^($(RECORDER_TESTS))$$' ./...

# The tests that record or change the machine (they call testenv.RequireRecorder or
# OwnMachine: skipped without root, failed under make test).
RECORDER_TESTS = TestRecordKilled|TestRecordStopsOnTime|TestRecordDevNull|TestRecordSameSector|TestRecordCommandEnd|TestRecordSignalStopsCommand|TestRecordDiskFull|TestRecordCapabilities|TestLossAccount|TestKernelReferee|TestGovernorFidelity|TestExperimentHaltpoll|TestExperimentSignalRestores|TestExperimentCommandFails|TestRunningKernel|TestTopTerminal|TestTopPipe|TestTopPipeClosed|TestTopPMQoS|TestRecordLive|TestRecordClassicBlockRecordNames|TestImportPerfRecord|TestRecordPMQoSChanges|TestImportPerfPMQoS

test-short: deps-duckdb deps-idlestat ## tests that need neither root nor BPF (every test but RECORDER_TESTS)
	$(GO) test -count=1 -skip '^($(RECORDER_TESTS))$$' ./...

# The race detector on the packages without root or BPF, and on pkg/record's
# tests that read a fixture root (TakeSnapshot's thread per CPU). pkg/model
# starts no goroutine, and TestReplayGolden takes 97 s under -race (7 s
# without), so it is left out; TestRunningKernel changes the machine's knobs.
RACE_RECORD_TESTS = TestParseCPUList|TestSysfs.*|TestTakeSnapshotFixture|TestMachineMetadata.*|TestKernelConfig|TestUndeliveredReason|TestIdlePeriodFromFlags|TestAttachPlanBookkeeping|TestLoadPlanned|TestKernelBTFReads|TestIOTaskJoin

test-race: ## go test -race on the pure-Go packages (no root needed)
	$(GO) test -count=1 -race -skip '^(TestReplayGolden|TestRunningKernel)$$' ./pkg/trace/ ./pkg/model/ ./pkg/analysis/ ./pkg/iowake/ ./pkg/tune/ ./internal/testenv/
	$(GO) test -count=1 -race -run '^($(RACE_RECORD_TESTS))$$' ./pkg/record/

tidy-check: ## fail if go.mod or go.sum is not what go mod tidy makes
	$(GO) mod tidy -diff

# Linters are run at pinned versions with go run (nothing added to go.mod).
GOLANGCI_LINT_VERSION = v2.15.0
# The staticcheck that GOLANGCI_LINT_VERSION embeds, and the checks
# .golangci.yml sets (keep them equal).
STATICCHECK_VERSION = v0.8.2
STATICCHECK_CHECKS  = all,-ST1000,-ST1003,-ST1016,-ST1020,-ST1021,-ST1022,-QF*

lint: ## golangci-lint (.golangci.yml: govet, staticcheck, unused, ineffassign); about 4.5 min from cold caches
	$(GO) run github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION) run ./...

staticcheck: ## staticcheck alone with lint's checks (what CI runs: 1 to 1.5 min from cold caches)
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) -checks '$(STATICCHECK_CHECKS)' ./...

# First the matrix's download and extract steps on their own, checked
# (TestKernelFetch: from nothing when the kernel cache is empty, which the
# matrix then reuses), then the matrix, then the lab's rows
# (scripts/lab-rows.sh: every governor on real servers' tables, the
# emulation's exit-latency check, the predicted-against-measured experiments
# and the README's lab-rows section; the lab kernel, when not cached,
# builds in the background meanwhile).
test-kernels: ## kernel matrix (root): host + Debian 6.1/6.12/7.3 under QEMU, then the lab's rows; writes testdata/kernel-matrix.*, testdata/lab-rows.* and the README's generated sections (CI=true: checks them)
	PATH="$$PATH:/usr/local/go/bin" $(GO) test -count=1 -tags kernelfetch -run '^TestKernelFetch$$' ./scripts/matrixreport
	scripts/kernel-matrix.sh
	scripts/lab-rows.sh

test-lab: build ## every lab check (root): exit latency, fidelity rows, a PM QoS change during a recording, cross-governor cases (got_idle_tick on the old idle loop among them), the pinned tracepoints' no-patch check, predicted-against-measured experiments; builds the lab kernel when it is not cached; writes nothing
	PATH="$$PATH:/usr/local/go/bin" $(GO) test -count=1 -tags lab -timeout 60m -parallel 64 -v -run '^(TestLabExitLatency|TestLabFidelity|TestLabPMQoS|TestLabCrossGovernor|TestLabAttachPatchesNoText|TestLabExperiment|TestLabSeed003)$$' ./lab/labtest

demo: build ## record a few seconds here (or use the bundled trace) and show stats and a what-if
	@scripts/demo.sh $(BIN)

bench: build ## idletrace vs perf record on the same workload, and Go benchmarks
	@scripts/bench.sh $(BIN)

fuzz: ## fuzz the trace reader, the profile files' and policy specs' parsers with the replay, and the commands on well-formed but odd traces (FUZZTIME=10m for the long run)
	$(GO) test ./pkg/trace/ -run '^$$' -fuzz '^FuzzReader$$' -fuzztime $${FUZZTIME:-60s} -fuzzminimizetime 1s
	$(GO) test ./pkg/model/ -run '^$$' -fuzz '^FuzzProfileReplay$$' -fuzztime $${FUZZTIME:-60s} -fuzzminimizetime 1s
	$(GO) test ./pkg/model/ -run '^$$' -fuzz '^FuzzPolicyReplay$$' -fuzztime $${FUZZTIME:-60s} -fuzzminimizetime 1s
	$(GO) test ./cmd/idletrace/ -run '^$$' -fuzz '^FuzzCommandsOnTrace$$' -fuzztime $${FUZZTIME:-60s} -fuzzminimizetime 1s

clean:
	rm -rf bin
