package launch

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
)

// The bare gRPC echo baseline of the real-path benchmarks: a RuntimeService
// that answers InvokeTool at once, in a child process (the benchmark's own
// test binary re-executed), so the baseline pays the same process hop as
// the real path.

// echoEnv marks the re-executed test binary as the echo process.
const echoEnv = "SHAREDOS_BENCH_ECHO_PROCESS"

// EchoContent is the content the echo kernel answers every call with.
var EchoContent = []byte(`[{"type":"text","text":"ok"}]`)

// ServeEchoIfChild turns the re-executed test binary into the echo server:
// call it from an init func of the benchmark's package. In the echo child
// it prints the address, serves until stdin closes and exits before any
// test or TestMain runs; otherwise it returns at once.
func ServeEchoIfChild() {
	if os.Getenv(echoEnv) == "" {
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
	return &sharedosv1.ToolResult{CallId: in.GetCallId(), Status: sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED, ContentJson: EchoContent}, nil
}

// StartEcho starts the echo server in a child process (the package must
// call ServeEchoIfChild from init) and returns a plain gRPC client to it and
// the child's pid (for a CPUMeter).
func StartEcho(tb testing.TB) (sharedosv1.RuntimeServiceClient, int) {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), echoEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { stdin.Close(); _ = cmd.Wait() })
	addr, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		tb.Fatalf("echo process: %v", err)
	}
	cc, err := grpc.NewClient(strings.TrimSpace(addr), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cc.Close() })
	return sharedosv1.NewRuntimeServiceClient(cc), cmd.Process.Pid
}
