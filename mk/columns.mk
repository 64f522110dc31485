# Evidence columns (issue 21, docs/columns.md): every column kind against the
# make run stack with the shared tool's scripted fake model
# (../shared/tools/harness-column): the four agent CLIs installed from
# services/systemtest/columns/npm (pinned by its lockfile), the scripted
# driver of each vendor shape and its live turn loop; reports and the
# comparison in bin/columns/. Slow tier (real CLIs): `make test` runs the
# scripted columns.

COLUMN_TESTFLAGS ?= -count=1 -timeout 20m

.PHONY: column
column: build npm-deps ## every evidence column (4 agent CLIs, scripted and live drivers) against the make run stack with the scripted model; reports in bin/columns/
	@scripts/npm-deps.sh services/systemtest/columns/npm
	cd services && $(GO) vet -tags column ./systemtest/columns/
	@cd services && $(GO) test -tags column $(COLUMN_TESTFLAGS) -v ./systemtest/columns/ 2>&1 | grep -v '^=== '; exit $${PIPESTATUS[0]}
