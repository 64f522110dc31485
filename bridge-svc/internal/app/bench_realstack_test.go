package app_test

// Helpers for BenchmarkToolCall: the real stack (bin/sharedos-dev starting
// authz-svc, files-provider, catalog-svc and bridge-svc as separate
// processes) and a bare gRPC echo server in a separate process (this test
// binary re-executed). Nothing here runs in normal tests.

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/sharedos/toolshare/services/stacktest"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
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
	return &sharedosv1.ToolResult{CallId: in.GetCallId(), Status: sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED, ContentJson: []byte(`[{"type":"text","text":"ok"}]`)}, nil
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

// startRealStackFrom runs the make-run stack (services/stacktest) of the
// checkout at root (this one, or a baseline build for before/after ratios in
// one run); dsn "" is the embedded store, otherwise every service keeps its
// state in PostgreSQL.
func startRealStackFrom(b *testing.B, root, dsn string) *realStack {
	b.Helper()
	st := stacktest.StartFrom(b, root, "SHAREDOS_DATABASE_URL="+dsn)
	return &realStack{catalogAddr: st.Addrs["catalog"], bridgeAddr: st.Addrs["bridge"], demo: st.Demo}
}
