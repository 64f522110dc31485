# bridge-svc targets; included by the top-level Makefile (paths relative to the repo root).

BRIDGE_CALLS ?= 5000x
BRIDGE_OPENS ?= 1000x

.PHONY: bench-bridge e2e-npm
BENCH_TARGETS += bench-bridge

bench-bridge: ## bridge-svc benchmarks: tools/call vs plain mcp-go (both eras, c=1/c=16), bare gRPC echo, OpenTurn 50 tools, memory per idle turn
	cd bridge-svc && go test ./internal/app/ -run '^$$' -bench 'BenchmarkToolCall|BenchmarkGRPCEcho' \
		-benchtime $(BRIDGE_CALLS) -timeout 30m
	cd bridge-svc && go test ./internal/app/ -run '^$$' -bench 'BenchmarkOpenTurn50Tools' \
		-benchtime $(BRIDGE_OPENS) -timeout 30m
	cd bridge-svc && go test ./internal/app/ -run '^$$' -bench 'BenchmarkIdleTurnMemory' \
		-benchtime 1x -timeout 30m

e2e-npm: npm-deps build ## the official TS SDK client and MCP conformance suite against the real stack on PostgreSQL
	cd services && go test ./e2e/ -run TestOfficialClientsAgainstTheRealStack -count=1 -v -timeout 10m
