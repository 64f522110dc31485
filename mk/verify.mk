# Reliability and security suite (services/systemtest/verify, build tag
# `verify` so `make test` leaves it out): the real binaries from bin/ against
# private PostgreSQL clusters (initdb in a temp dir; the shared server on 5432
# is never touched). See docs/reliability.md. Budget: < 15 minutes on 2 cores
# (measured ~4).

VERIFY_TESTFLAGS ?= -race -count=1 -timeout 14m
# Fixed execution counts, not durations: a -fuzztime deadline that expires
# while a worker minimizes an input is reported as a failure.
VERIFY_FUZZ_EDGE ?= 20000x
VERIFY_FUZZ_CALL ?= 5000x
VERIFY_PKG := ./systemtest/verify/

.PHONY: verify
verify: build ## Reliability/security suite: faults, lease isolation, hostile input, secrets, load, audit (< 15 min).
	cd services && $(GO) vet -tags verify $(VERIFY_PKG)
	@cd services && rc=0; \
	$(GO) test -tags verify $(VERIFY_TESTFLAGS) -v $(VERIFY_PKG) 2>&1 | grep -v '^=== '; [ $${PIPESTATUS[0]} -eq 0 ] || rc=1; \
	$(GO) test -tags verify -run '^$$' -fuzz '^FuzzMCPEdge$$' -fuzztime $(VERIFY_FUZZ_EDGE) $(VERIFY_PKG) 2>&1 | grep -v '^fuzz: elapsed'; [ $${PIPESTATUS[0]} -eq 0 ] || rc=1; \
	$(GO) test -tags verify -run '^$$' -fuzz '^FuzzToolCall$$' -fuzztime $(VERIFY_FUZZ_CALL) $(VERIFY_PKG) 2>&1 | grep -v '^fuzz: elapsed'; [ $${PIPESTATUS[0]} -eq 0 ] || rc=1; \
	exit $$rc
