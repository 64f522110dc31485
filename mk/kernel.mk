# Kernel (RuntimeService) targets; included by the top-level Makefile (paths relative to the repo root).

KERNEL_BENCHTIME ?= 3s
KERNEL_BENCHCOUNT ?= 3

.PHONY: bench-kernel test-kernel
BENCH_TARGETS += bench-kernel

test-kernel: ## vet and race-test the kernel, operation records, requirement and the files provider (needs PostgreSQL)
	cd services && go vet ./contract/requirement/... ./providers/... ./cmd/files-provider/ && \
		go test -race ./contract/requirement/... ./providers/...
	cd catalog-svc && go vet ./internal/pipeline/... && \
		go test -race ./internal/pipeline/...

bench-kernel: build ## InvokeTool end to end on the real services as separate processes (kernel -> authz -> files), embedded and PostgreSQL, c=1/c=16, vs a bare gRPC echo process, same run
	cd catalog-svc && go test ./internal/pipeline/ -run '^$$' -bench '^BenchmarkInvokeTool$$' \
		-benchtime $(KERNEL_BENCHTIME) -count $(KERNEL_BENCHCOUNT) -benchmem -timeout 30m
