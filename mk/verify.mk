# Reliability and security suite (verify/, its own module outside go.work):
# the real binaries from bin/ against private PostgreSQL clusters (initdb in
# a temp dir; the shared server on 5432 is never touched). See
# docs/reliability.md. Budget: < 15 minutes on 2 cores (measured ~4).

VERIFY_TESTFLAGS ?= -race -count=1 -timeout 14m
# Fixed execution counts, not durations: a -fuzztime deadline that expires
# while a worker minimizes an input is reported as a failure.
VERIFY_FUZZ_EDGE ?= 20000x
VERIFY_FUZZ_CALL ?= 5000x

.PHONY: verify
verify: build ## Reliability/security suite: faults, lease isolation, hostile input, secrets, load, audit (< 15 min).
	cd verify && GOWORK=off $(GO) vet ./...
	@cd verify && rc=0; \
	GOWORK=off $(GO) test $(VERIFY_TESTFLAGS) -v ./... 2>&1 | grep -v '^=== '; [ $${PIPESTATUS[0]} -eq 0 ] || rc=1; \
	GOWORK=off $(GO) test -run '^$$' -fuzz '^FuzzMCPEdge$$' -fuzztime $(VERIFY_FUZZ_EDGE) . 2>&1 | grep -v '^fuzz: elapsed'; [ $${PIPESTATUS[0]} -eq 0 ] || rc=1; \
	GOWORK=off $(GO) test -run '^$$' -fuzz '^FuzzToolCall$$' -fuzztime $(VERIFY_FUZZ_CALL) . 2>&1 | grep -v '^fuzz: elapsed'; [ $${PIPESTATUS[0]} -eq 0 ] || rc=1; \
	exit $$rc
