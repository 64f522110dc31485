package pipeline_test

// Helpers for BenchmarkInvokeTool: the real stack (bin/sharedos-dev starting
// authz-svc, files-provider, catalog-svc and bridge-svc as separate
// processes) and a bare gRPC echo server in a separate process (this test
// binary re-executed). Nothing here runs in normal tests.

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sharedos/toolshare/services/stacktest"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/platform/grpcx"
)

const benchEchoEnv = "SHAREDOS_BENCH_ECHO_PROCESS"

// When re-executed with benchEchoEnv set, the test binary is the bare echo
// server: it prints its address, serves until stdin closes, and exits before
// any test or TestMain runs.
func init() {
	if os.Getenv(benchEchoEnv) == "" {
		return
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	s := grpc.NewServer()
	sharedosv1.RegisterRuntimeServiceServer(s, echoKernel{})
	go func() { _ = s.Serve(lis) }()
	fmt.Println(lis.Addr().String())
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // EOF when the parent ends
	s.Stop()
	os.Exit(0)
}

// echoKernel answers InvokeTool at once: the bare gRPC round trip, with the
// same request message as the real call.
type echoKernel struct {
	sharedosv1.UnimplementedRuntimeServiceServer
}

func (echoKernel) InvokeTool(_ context.Context, in *sharedosv1.ToolCall) (*sharedosv1.ToolResult, error) {
	return &sharedosv1.ToolResult{CallId: in.GetCallId(), Status: sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED, ContentJson: echoContent}, nil
}

// startEchoProcess starts the echo server in a child process and returns a
// plain gRPC client to it, and a stack whose only process is the echo
// server (for cpuMeter).
func startEchoProcess(b *testing.B) (sharedosv1.RuntimeServiceClient, *realStack) {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), benchEchoEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { stdin.Close(); _ = cmd.Wait() })
	addr, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatalf("echo process: %v", err)
	}
	cc, err := grpc.NewClient(strings.TrimSpace(addr), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cc.Close() })
	es := &realStack{}
	es.demo.PIDs = map[string]int{"echo": cmd.Process.Pid}
	return sharedosv1.NewRuntimeServiceClient(cc), es
}

// realStack is bin/sharedos-dev and its four services on free loopback ports.
type realStack struct {
	catalogAddr, bridgeAddr string
	demo                    stacktest.Demo
}

// benchTurn opens a turn for alice/engineer through the real bridge and
// returns its context and the pin the bridge would send: every leased tool
// with the SHA-256 hex of its canonical JSON, and the catalogue hash.
func (s *realStack) benchTurn(b *testing.B) (string, *sharedosv1.AccessContext, *sharedosv1.CataloguePin) {
	b.Helper()
	cc, err := grpcx.Dial(s.bridgeAddr)
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Close()
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
// bridge does.
func (s *realStack) kernelClient(b *testing.B) sharedosv1.RuntimeServiceClient {
	cc, err := grpcx.Dial(s.catalogAddr)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cc.Close() })
	return sharedosv1.NewRuntimeServiceClient(cc)
}

// startRealStack runs the make-run stack (services/stacktest); dsn "" is the
// embedded store, otherwise every service keeps its state in PostgreSQL.
func startRealStack(b *testing.B, dsn string) *realStack {
	b.Helper()
	st := stacktest.Start(b, "SHAREDOS_DATABASE_URL="+dsn)
	return &realStack{catalogAddr: st.Addrs["catalog"], bridgeAddr: st.Addrs["bridge"], demo: st.Demo}
}
