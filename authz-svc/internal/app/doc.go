// Package app is the composition root of authz-svc: Config (from flags and
// SHAREDOS_* env) → Complete (load the policy, open the listener) → Run
// (serve gRPC with health and reflection, watch the policy directory).
// Nothing listens until the policy has loaded.
package app
