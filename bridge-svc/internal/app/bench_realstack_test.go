package app_test

// Helpers for BenchmarkToolCall: the real stack (services/systemtest/launch starting
// authz-svc, files-provider, catalog-svc and bridge-svc as separate
// processes) and a bare gRPC echo server in a separate process (this test
// binary re-executed). Nothing here runs in normal tests.

import (
	"testing"

	"github.com/sharedos/toolshare/services/systemtest/launch"
)

// The echo baseline runs in a re-executed copy of this test binary.
func init() { launch.ServeEchoIfChild() }

// realStack is the make-run stack's four services on free loopback ports.
type realStack struct {
	catalogAddr, bridgeAddr string
	demo                    launch.Demo
}

// startRealStackFrom runs the make-run stack (services/systemtest/launch) of
// the checkout at root (this one, or a baseline build for before/after ratios in
// one run); dsn "" is the embedded store, otherwise every service keeps its
// state in PostgreSQL.
func startRealStackFrom(b *testing.B, root, dsn string, plaintext bool) *realStack {
	b.Helper()
	st := launch.Start(b, launch.Options{Root: root, DatabaseURL: dsn, Plaintext: plaintext})
	return &realStack{catalogAddr: st.Addrs["catalog"], bridgeAddr: st.Addrs["bridge"], demo: st.Demo}
}
