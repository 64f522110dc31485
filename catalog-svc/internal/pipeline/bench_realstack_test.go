package pipeline_test

// Helpers for BenchmarkInvokeTool: the real stack (services/systemtest/launch starting
// authz-svc, files-provider, catalog-svc and bridge-svc as separate
// processes) and a bare gRPC echo server in a separate process (this test
// binary re-executed). Nothing here runs in normal tests.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sharedos/toolshare/services/contract/callers"
	"github.com/sharedos/toolshare/services/contract/pinproof"
	"github.com/sharedos/toolshare/services/systemtest/launch"

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

// benchTurn grants a turn for alice/engineer as the bridge does at
// OpenTurn (GrantTurn, with a bridge identity) and returns its id, grant
// and files.read's pin proof (which the bridge sends with each call).
func (s *realStack) benchTurn(b *testing.B, kernel sharedosv1.RuntimeServiceClient) (string, string, *sharedosv1.PinProof) {
	b.Helper()
	turn := fmt.Sprintf("bench-%d", time.Now().UnixNano())
	resp, err := kernel.GrantTurn(context.Background(), &sharedosv1.GrantTurnRequest{
		TurnId:    turn,
		Context:   &sharedosv1.AccessContext{Principal: "alice", Roles: []string{"engineer"}},
		ExpiresAt: timestamppb.New(time.Now().Add(time.Hour)),
	})
	if err != nil {
		b.Fatalf("GrantTurn: %v", err)
	}
	tools, prompts := map[string]string{}, map[string]string{}
	for _, t := range resp.GetTools() {
		tools[t.GetName()] = t.GetDigest()
	}
	for _, p := range resp.GetPrompts() {
		prompts[p.GetName()] = p.GetDigest()
	}
	tree, err := pinproof.Build(tools, prompts)
	if err != nil {
		b.Fatal(err)
	}
	proof, ok := tree.Prove(pinproof.Tool, "files.read")
	if !ok {
		b.Fatal("files.read is not in the granted catalogue")
	}
	return turn, resp.GetGrant(), proof
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
