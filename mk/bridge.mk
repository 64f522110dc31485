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
