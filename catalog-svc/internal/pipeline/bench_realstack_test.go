package pipeline_test

// Helpers for BenchmarkInvokeTool: the real stack (services/systemtest/launch starting
// authz-svc, files-provider, catalog-svc and bridge-svc as separate
// processes) and a bare gRPC echo server in a separate process (this test
// binary re-executed). Nothing here runs in normal tests.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"testing"
	"time"

	"github.com/sharedos/toolshare/services/contract/callers"
	"github.com/sharedos/toolshare/services/systemtest/launch"

	"google.golang.org/protobuf/types/known/durationpb"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/platform/grpcx"
)

// The echo baseline runs in a re-executed copy of this test binary.
func init() { launch.ServeEchoIfChild() }

// realStack is the make-run stack's four services on free loopback ports.
type realStack struct {
	st                      *launch.Stack
	catalogAddr, bridgeAddr string
	demo                    launch.Demo
}

// benchTurn opens a turn for alice/engineer through the real bridge and
// returns its context and the pin the bridge would send: every leased tool
// with the SHA-256 hex of its canonical JSON, and the catalogue hash.
func (s *realStack) benchTurn(b *testing.B) (string, *sharedosv1.AccessContext, *sharedosv1.CataloguePin) {
	b.Helper()
	cc := s.st.Dial(s.bridgeAddr) // as the operator
	actx := &sharedosv1.AccessContext{Principal: "alice", Roles: []string{"engineer"}}
	lease, err := sharedosv1.NewBridgeServiceClient(cc).OpenTurn(context.Background(), &sharedosv1.OpenTurnRequest{
		Context: actx,
		Policy:  &sharedosv1.ToolPolicy{Mode: sharedosv1.PolicyMode_POLICY_MODE_PERMISSIVE},
		Harness: &sharedosv1.HarnessIdentity{Name: "bench", McpSupport: sharedosv1.McpSupport_MCP_SUPPORT_NATIVE},
		Ttl:     durationpb.New(time.Hour),
	})
	if err != nil {
		b.Fatalf("OpenTurn: %v", err)
	}
	pin := &sharedosv1.CataloguePin{CatalogHash: lease.GetCatalogHash()}
	for _, t := range lease.GetTools() {
		sum := sha256.Sum256(t.GetCanonicalJson())
		pin.Tools = append(pin.Tools, &sharedosv1.PinnedTool{Name: t.GetName(), Digest: hex.EncodeToString(sum[:])})
	}
	return lease.GetTurnId(), actx, pin
}

// kernelClient dials the real kernel (catalog-svc) through grpcx, as the
// bridge does: with a bridge identity of the stack's CA.
func (s *realStack) kernelClient(b *testing.B) sharedosv1.RuntimeServiceClient {
	creds := s.st.Credentials(b, s.st.Identity(b, "bench-bridge", callers.Bridge, "bench"))
	cc, err := grpcx.Dial(s.catalogAddr, creds.DialOption(callers.Catalog))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cc.Close() })
	return sharedosv1.NewRuntimeServiceClient(cc)
}

// startRealStack runs the make-run stack (services/systemtest/launch); dsn
// "" is the embedded store, otherwise every service keeps its state in
// PostgreSQL.
func startRealStack(b *testing.B, dsn string) *realStack {
	b.Helper()
	st := launch.Start(b, launch.Options{DatabaseURL: dsn})
	return &realStack{st: st, catalogAddr: st.Addrs["catalog"], bridgeAddr: st.Addrs["bridge"], demo: st.Demo}
}
