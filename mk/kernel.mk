# Kernel (RuntimeService) targets; included by the top-level Makefile (paths relative to the repo root).

KERNEL_BENCHTIME ?= 3s
KERNEL_BENCHCOUNT ?= 3

.PHONY: bench-kernel test-kernel
BENCH_TARGETS += bench-kernel

test-kernel: ## vet and race-test the kernel, operation records, requirement and the files provider (needs PostgreSQL)
	cd services && go vet ./kernel/requirement/... ./providers/... ./cmd/files-provider/ && \
		go test -race ./kernel/requirement/... ./providers/...
	cd catalog-svc && go vet ./internal/runtime/... ./internal/oprecord/... && \
		go test -race ./internal/runtime/... ./internal/oprecord/...

bench-kernel: build ## InvokeTool end to end on the real services as separate processes (kernel -> authz -> files), embedded and PostgreSQL, c=1/c=16, vs a bare gRPC echo process, same run
	cd catalog-svc && go test ./internal/runtime/ -run '^$$' -bench '^BenchmarkInvokeTool$$' \
		-benchtime $(KERNEL_BENCHTIME) -count $(KERNEL_BENCHCOUNT) -benchmem -timeout 30m
