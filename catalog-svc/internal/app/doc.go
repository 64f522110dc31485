// Package app is catalog-svc's composition root: Config (flags and
// SHAREDOS_* env) → Complete (open the store, dial authz-svc, load the
// catalogue; nothing listens until this succeeds) → Run (serve
// CatalogService and the kernel's RuntimeService until the context ends).
//
// Health: "liveness" is SERVING while the process runs; the overall service
// "" (readiness) follows the store: NOT_SERVING while PostgreSQL does not
// answer, so Kubernetes stops routing calls that could not be recorded.
package app
