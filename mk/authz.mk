# authz-svc targets; included by the top-level Makefile (paths relative to the repo root).

# Fixed iteration counts (not a duration) so that each point is measured
# once, after one quiet-gate wait, instead of once per ramp-up step.
AUTHZ_BENCH_N      ?= 20000x
AUTHZ_BENCH_FILTER ?= 300x
AUTHZ_BENCHCOUNT   ?= 3

BENCH_TARGETS += bench-authz

.PHONY: bench-authz test-authz opa-bin

opa-bin: ## Build bin/tools/opa from the OPA version pinned in authz-svc/go.mod (the benchmark baseline).
	@mkdir -p $(TOOLS)
	cd authz-svc && $(GO) build -o ../$(TOOLS)/opa github.com/open-policy-agent/opa

test-authz: ## Vet and race-test authz-svc (includes the Rego unit tests via OPA's tester).
	cd authz-svc && $(GO) vet ./... && $(GO) test -race ./...

bench-authz: opa-bin ## authz-svc vs bare gRPC echo vs `opa run --server` (c=1, c=16), eval alone, FilterTools over 1,000 tools.
	cd authz-svc && $(GO) test ./internal/app/ -run '^$$' -bench 'BenchmarkAuthorize' \
		-benchtime $(AUTHZ_BENCH_N) -count $(AUTHZ_BENCHCOUNT) -benchmem
	cd authz-svc && $(GO) test ./internal/app/ -run '^$$' -bench 'BenchmarkFilterTools1000' \
		-benchtime $(AUTHZ_BENCH_FILTER) -count $(AUTHZ_BENCHCOUNT) -benchmem
