// Package app is bridge-svc's composition root and command line. Main is
// the whole CLI (serve, migrate [--check], config-reference); serve runs
// Config (flags and SHAREDOS_* environment) → Complete (validate, open the
// store, dial catalog-svc and the kernel, bind the listeners and the
// optional Prometheus /metrics endpoint, register the bridge's metrics) →
// Run (gRPC BridgeService + health on --listen, the turn MCP endpoints on
// --http-listen, and the sweeper that frees cached turn servers, purges
// leases closed or expired longer than --lease-retention ago, at most
// hourly, and keeps readiness in step with the lease store).
package app
