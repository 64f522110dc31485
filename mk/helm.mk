# Helm chart: pinned helm, lint, render tests. Included by the top-level Makefile.
#
# helm is built from the Go module proxy at the version pinned in
# tools/helm/go.mod (no curl | sh installer). The ldflags match helm's own
# release build: the version string, and the Kubernetes version lint and
# template default to (the client-go minor helm v3.22 is built with).

HELM          := bin/tools/helm
HELM_VERSION  := v3.22.0
HELM_K8S_MINOR := 37
HELM_KUBE_VERSION := 1.33.0
HELM_CHART    := helm/sharedos
HELM_LDFLAGS  := -X helm.sh/helm/v3/internal/version.version=$(HELM_VERSION) \
	-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 \
	-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$(HELM_K8S_MINOR) \
	-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 \
	-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$(HELM_K8S_MINOR)

.PHONY: tools-helm helm-lint helm-test helm-policies

tools-helm: $(HELM) ## build the pinned helm into bin/tools/helm (only when missing or the pin changed)

$(HELM): tools/helm/go.mod tools/helm/go.sum
	@mkdir -p $(@D)
	GOWORK=off go build -C tools/helm -ldflags '$(HELM_LDFLAGS)' -o ../../$(HELM) helm.sh/helm/v3/cmd/helm

helm-lint: tools-helm ## helm lint --strict the chart with the default and every ci/ values file
	$(HELM) lint --strict --kube-version $(HELM_KUBE_VERSION) $(HELM_CHART)
	@for f in $(HELM_CHART)/ci/*-values.yaml; do \
		echo "==> $$f"; \
		$(HELM) lint --strict --kube-version $(HELM_KUBE_VERSION) $(HELM_CHART) -f $$f || exit 1; \
	done

helm-test: tools-helm ## helm lint (TestLint), render every values set, decode strictly into k8s types, check invariants and Dockerfiles
	cd helm/test && GOWORK=off HELM_BIN=$(CURDIR)/$(HELM) go test -count=1 ./...

helm-policies: ## copy deploy/policies (Rego tests excluded) into the chart's policies/ tree
	@find $(HELM_CHART)/policies -mindepth 1 ! -name README.md -delete
	@cd deploy/policies && find . -type f ! -name '.*' ! -name '*_test.rego' \
		\( -name '*.rego' -o -name '*.json' -o -name '*.yaml' -o -name '*.yml' \) \
		-exec sh -c 'mkdir -p "$$0/$$(dirname "$$1")" && cp "$$1" "$$0/$$1"' $(CURDIR)/$(HELM_CHART)/policies {} \;
	@find $(HELM_CHART)/policies -type f | sort
