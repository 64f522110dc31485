# bridge-svc targets; included by the top-level Makefile (paths relative to the repo root).

BRIDGE_CALLS ?= 5000x
BRIDGE_OPENS ?= 1000x
BRIDGE_COUNT ?= 3

.PHONY: bench-bridge bench-upstream e2e-npm harness-column
BENCH_TARGETS += bench-bridge bench-upstream

bench-bridge: build ## bridge-svc benchmarks: full path on the real services vs plain mcp-go and a bare gRPC echo (both eras, c=1/c=16, same run); fake-kernel variants; OpenTurn 50 tools; memory per idle turn
	cd bridge-svc && go test ./internal/app/ -run '^$$' -bench '^BenchmarkToolCall$$' \
		-benchtime $(BRIDGE_CALLS) -count $(BRIDGE_COUNT) -timeout 30m
	cd bridge-svc && go test ./internal/app/ -run '^$$' -bench 'BenchmarkToolCallFakeKernel|BenchmarkToolCallInProcessKernel|BenchmarkGRPCEcho' \
		-benchtime $(BRIDGE_CALLS) -timeout 30m
	cd bridge-svc && go test ./internal/app/ -run '^$$' -bench 'BenchmarkOpenTurn50Tools' \
		-benchtime $(BRIDGE_OPENS) -timeout 30m
	cd bridge-svc && go test ./internal/app/ -run '^$$' -bench 'BenchmarkIdleTurnMemory' \
		-benchtime 1x -timeout 30m

bench-upstream: build ## an upstream MCP server's tool through the full path vs the same upstream called directly, beside the files path vs plain mcp-go (both eras, c=1/c=16, same run)
	cd bridge-svc && go test ./internal/app/ -run '^$$' -bench '^BenchmarkUpstreamToolCall$$' \
		-benchtime $(BRIDGE_CALLS) -count $(BRIDGE_COUNT) -timeout 30m

e2e-npm: npm-deps build ## the official TS SDK client and MCP conformance suite against the real stack on PostgreSQL
	cd services && go test ./systemtest/e2e/ -run TestOfficialClientsAgainstTheRealStack -count=1 -v -timeout 10m

harness-column: build ## real Claude Code, Codex, Gemini CLI and Pi against a live turn (slow tier, not in CI; npm; runner: HARNESS_COLUMN)
	scripts/harness-column.sh

PROFILE_SECONDS ?= 20
PROFILE_ERA     ?= 2026-07-28
PROFILE_CONCURRENCY ?= 16
PROFILE_PATH    ?= files

.PHONY: profile
profile: build ## the full path at c=16 for PROFILE_SECONDS (20) with --debug-listen on every service: CPU and allocation profiles of each process in bin/profiles/, top functions printed (PROFILE_ERA, PROFILE_CONCURRENCY, PROFILE_PATH files|upstream, PROFILE_DATABASE_URL)
	@mkdir -p $(BIN)/profiles
	cd services && PROFILE_SECONDS=$(PROFILE_SECONDS) PROFILE_ERA=$(PROFILE_ERA) PROFILE_PATH=$(PROFILE_PATH) PROFILE_CONCURRENCY=$(PROFILE_CONCURRENCY) PROFILE_DIR=$(CURDIR)/$(BIN)/profiles \
		$(GO) test -tags perf ./systemtest/perf/ -run TestProfileFullPath -count=1 -v -timeout 10m
	@for f in $(BIN)/profiles/*.cpu.pprof; do \
		echo "==== $$f (flat)"; $(GO) tool pprof -top -nodecount=20 $$f 2>/dev/null | tail -n +5; \
		echo "==== $$f (cum)";  $(GO) tool pprof -top -cum -nodecount=25 $$f 2>/dev/null | tail -n +5; \
	done

BENCH_QUICK_WINDOW ?= 3s

.PHONY: bench-quick
bench-quick: build ## the headline ratio table (P1a–P1e of docs/benchmarks.md; P1e needs the local PostgreSQL) and what the floor measured beside it allows, in one interleaved run, under 3 minutes; SHAREDOS_BENCH_BASELINE_ROOT=<built checkout> adds before/after
	cd services && BENCH_QUICK_WINDOW=$(BENCH_QUICK_WINDOW) $(GO) test -tags perf ./systemtest/perf/ -run TestBenchQuick -count=1 -v -timeout 10m
	@cat $(BIN)/bench-quick.md
