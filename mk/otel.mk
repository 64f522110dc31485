# OpenTelemetry: the pinned Jaeger all-in-one and the trace demo. Included by
# the top-level Makefile.
#
# Jaeger is built from the Go module proxy at the version pinned in
# tools/jaeger/go.mod (no container, no downloaded binary). The ldflags stamp
# the version `jaeger version` and the UI report.

JAEGER         := bin/tools/jaeger
JAEGER_VERSION := v1.76.0
JAEGER_LDFLAGS := -X github.com/jaegertracing/jaeger/internal/version.latestVersion=$(JAEGER_VERSION)

.PHONY: tools-jaeger trace-demo

tools-jaeger: $(JAEGER) ## Build the pinned Jaeger all-in-one into bin/tools/jaeger (big: a few minutes the first time).

$(JAEGER): tools/jaeger/go.mod tools/jaeger/go.sum
	@mkdir -p $(@D)
	GOWORK=off go build -C tools/jaeger -ldflags '$(JAEGER_LDFLAGS)' -o ../../$(JAEGER) github.com/jaegertracing/jaeger/cmd/jaeger

trace-demo: build tools-jaeger ## Run the make-run stack exporting to a local Jaeger, make demo calls, check the traces arrived (docs/observability.md).
	JAEGER=$(JAEGER) BIN=bin scripts/trace-demo.sh
