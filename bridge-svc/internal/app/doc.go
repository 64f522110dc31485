// Package app is bridge-svc's composition root: Config (flags and
// SHAREDOS_* environment) → Complete (validate, open the store, dial
// catalog-svc and the kernel; nothing listens yet) → Run (gRPC
// BridgeService + health on --listen, the turn MCP endpoints on
// --http-listen, and the sweeper that frees cached turn servers).
package app
