# catalog-svc targets; included by the top-level Makefile (paths relative to the repo root).

CATALOG_BENCHTIME ?= 1s
CATALOG_BENCHCOUNT ?= 3

.PHONY: bench-catalog
BENCH_TARGETS += bench-catalog

bench-catalog: ## catalog-svc benchmarks: ListTools 1k/10k, catalogHash vs SHA-256, 10k COPY registration, one upstream tools/call dispatched (upstream in process), one operation record and one reconcile pass on the embedded store
	cd catalog-svc && go test ./internal/catalog/ -run '^$$' \
		-bench 'BenchmarkListTools|BenchmarkCatalogHash|BenchmarkRegisterBatch' \
		-benchtime $(CATALOG_BENCHTIME) -count $(CATALOG_BENCHCOUNT) -benchmem -timeout 30m
	cd catalog-svc && go test ./internal/upstream/ -run '^$$' -bench 'BenchmarkHandle' \
		-benchtime $(CATALOG_BENCHTIME) -count $(CATALOG_BENCHCOUNT) -benchmem -timeout 30m
	cd catalog-svc && go test ./internal/pipeline/records/memory/ -run '^$$' -bench 'BenchmarkBeginComplete|BenchmarkReconcile' \
		-benchtime 200000x -count $(CATALOG_BENCHCOUNT) -benchmem -timeout 30m
