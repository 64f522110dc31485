// Package charttest checks the sharedos Helm chart and the service
// Dockerfiles without a cluster or a Docker engine.
//
// The chart is rendered by the pinned helm binary (bin/tools/helm, built by
// `make tools-helm`) with the default values and every ci/*-values.yaml file;
// each rendered document is decoded strictly into its k8s.io/api type, so a
// misspelt or misplaced field fails the test instead of being dropped by the
// API server. Invariants that matter for a safe rollout (probes, resources,
// security context, PDBs, hooks, network isolation, no session affinity) are
// then checked on the typed objects.
//
// This is its own module, outside go.work, so the Kubernetes API types never
// enter the services' dependency graph. Run it with
//
//	cd helm/test && GOWORK=off go test ./...
package charttest
