// Package memory is the embedded lease store: one process, no external
// server. It is what `make run` uses and passes the same conformance suite
// (leases/storetest) as the postgres store.
package memory
