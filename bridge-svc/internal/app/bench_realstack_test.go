package app_test

// Helpers for BenchmarkToolCall: the real stack (bin/sharedos-dev starting
// authz-svc, files-provider, catalog-svc and bridge-svc as separate
// processes) and a bare gRPC echo server in a separate process (this test
// binary re-executed). Nothing here runs in normal tests.

import (
	"testing"

	"github.com/sharedos/toolshare/services/stacktest"
)

// The echo baseline runs in a re-executed copy of this test binary.
func init() { stacktest.ServeEchoIfChild() }

// realStack is bin/sharedos-dev and its four services on free loopback ports.
type realStack struct {
	catalogAddr, bridgeAddr string
	demo                    stacktest.Demo
}

// startRealStackFrom runs the make-run stack (services/stacktest) of the
// checkout at root (this one, or a baseline build for before/after ratios in
// one run); dsn "" is the embedded store, otherwise every service keeps its
// state in PostgreSQL.
func startRealStackFrom(b *testing.B, root, dsn string) *realStack {
	b.Helper()
	st := stacktest.StartFrom(b, root, "SHAREDOS_DATABASE_URL="+dsn)
	return &realStack{catalogAddr: st.Addrs["catalog"], bridgeAddr: st.Addrs["bridge"], demo: st.Demo}
}
