# SharedOS toolshare — run `make help` for the list of targets.
#
# The README's two commands are `make run` and `make test`; CI (.ci/run) calls
# `make test` exactly as a newcomer would.

SHELL := /bin/bash
.DEFAULT_GOAL := help

GO        ?= go
BIN       := bin
TOOLS     := $(BIN)/tools
MODULES   := proto services catalog-svc authz-svc bridge-svc
PKGS      := ./proto/... ./services/... ./catalog-svc/... ./authz-svc/... ./bridge-svc/...
CMDS      := $(sort $(dir $(wildcard catalog-svc/cmd/*/main.go authz-svc/cmd/*/main.go bridge-svc/cmd/*/main.go services/cmd/*/main.go)))
GOTESTFLAGS ?= -race -count=1 -timeout 15m

-include mk/*.mk

# Suites that run after the Go tests, and the benchmark targets, contributed by mk/*.mk.
TEST_EXTRA    += helm-test

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST) | sort

# ---- tools (pinned in tools/*/go.mod; built locally, never downloaded as binaries)
$(TOOLS)/protoc-gen-go $(TOOLS)/protoc-gen-go-grpc: tools/go.mod
	@mkdir -p $(TOOLS)
	GOWORK=off $(GO) build -C tools -o ../$(TOOLS)/ google.golang.org/protobuf/cmd/protoc-gen-go google.golang.org/grpc/cmd/protoc-gen-go-grpc

$(TOOLS)/buf: tools/buf/go.mod
	@mkdir -p $(TOOLS)
	GOWORK=off $(GO) build -C tools/buf -o ../../$(TOOLS)/buf github.com/bufbuild/buf/cmd/buf

$(TOOLS)/golangci-lint: tools/lint/go.mod
	@mkdir -p $(TOOLS)
	GOWORK=off $(GO) build -C tools/lint -o ../../$(TOOLS)/golangci-lint github.com/golangci/golangci-lint/v2/cmd/golangci-lint

.PHONY: tools
tools: $(TOOLS)/protoc-gen-go $(TOOLS)/buf ## Build the pinned code-generation tools into bin/tools.

# ---- code generation
.PHONY: proto
proto: $(TOOLS)/protoc-gen-go $(TOOLS)/buf ## Lint the .proto files and regenerate the committed Go code.
	$(TOOLS)/buf lint
	$(TOOLS)/buf generate

.PHONY: gen-check
gen-check: proto ## Fail when the committed generated code is stale.
	@git diff --exit-code -- proto/ || { echo "gen-check: generated code is stale: run 'make proto' and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- proto/)" || { git status --porcelain -- proto/; echo "gen-check: untracked generated files"; exit 1; }

# ---- build
.PHONY: build
build: ## Build every binary into bin/.
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/ $(addprefix ./,$(CMDS))

# ---- run
.PHONY: run
run: build ## Start the whole system locally (embedded store) and open a demo turn.
	$(BIN)/sharedos-dev --bin $(BIN) --root .

# ---- test
.PHONY: check-postgres
check-postgres: ## Check that PostgreSQL answers (tests use a real server).
	@scripts/check-postgres.sh

.PHONY: npm-deps
npm-deps: ## Install the pinned MCP clients and conformance suite (services/systemtest/npm, Node 22 from npm).
	@scripts/npm-deps.sh

.PHONY: test
test: check-postgres npm-deps build ## Run every module's tests with -race (needs PostgreSQL; see README).
	$(GO) test $(GOTESTFLAGS) $(PKGS)
	@$(MAKE) --no-print-directory test-extra

# Extra suites contributed by mk/*.mk (helm chart tests, ...) hook in here.
.PHONY: test-extra
test-extra: $(TEST_EXTRA)

.PHONY: docs
docs: build ## Regenerate docs/configuration.md from the binaries' flags.
	cd services && UPDATE_DOCS=1 $(GO) test ./systemtest/e2e/ -run TestConfigurationReferenceIsCurrent -count=1

.PHONY: fuzz
fuzz: ## Run each fuzz target for FUZZTIME (default 20s).
	@scripts/fuzz.sh $${FUZZTIME:-20s}

.PHONY: bench
bench: $(BENCH_TARGETS) ## Run every benchmark (results go in docs/benchmarks.md by hand).

# ---- lint
.PHONY: lint
lint: $(TOOLS)/golangci-lint ## gofmt, go vet and golangci-lint (pinned) over every module.
	@out=$$(gofmt -l $(MODULES) helm 2>/dev/null | grep -v '\.pb\.go$$'); test -z "$$out" || { echo "gofmt needed:"; echo "$$out"; exit 1; }
	$(GO) vet $(PKGS)
	for m in $(MODULES); do (cd $$m && ../$(TOOLS)/golangci-lint run ./...) || exit 1; done

.PHONY: clean
clean: ## Remove build output.
	rm -rf $(BIN)
