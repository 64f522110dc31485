package launch

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/callers"
	"github.com/sharedos/toolshare/services/platform/mtls"
)

// The bare gRPC echo baseline of the real-path benchmarks: a RuntimeService
// that answers InvokeTool at once, in a child process (the benchmark's own
// test binary re-executed), so the baseline pays the same process hop as
// the real path.

// echoEnv marks the re-executed test binary as the echo process;
// echoTLSEnv, when set, holds its CA, certificate and key files (a path
// list) and makes it serve mutual TLS.
const (
	echoEnv    = "SHAREDOS_BENCH_ECHO_PROCESS"
	echoTLSEnv = "SHAREDOS_BENCH_ECHO_TLS"
)

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
	var opts []grpc.ServerOption
	if files := os.Getenv(echoTLSEnv); files != "" {
		f := filepath.SplitList(files)
		if len(f) != 3 {
			fmt.Fprintf(os.Stderr, "%s: want ca%ccert%ckey\n", echoTLSEnv, os.PathListSeparator, os.PathListSeparator)
			os.Exit(2)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		creds, err := mtls.Load(ctx, mtls.Config{CA: f[0], Cert: f[1], Key: f[2]})
		cancel()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		opts = creds.ServerOptions()
	}
	s := grpc.NewServer(opts...)
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
	return startEcho(tb, nil, grpc.WithTransportCredentials(insecure.NewCredentials()))
}

// StartEchoTLS is StartEcho with the internal plane's mutual TLS: the
// child serves as the kernel identity s issues, and the client dials as a
// bridge identity, each hop as the real path makes it.
func StartEchoTLS(tb testing.TB, s *Stack) (sharedosv1.RuntimeServiceClient, int) {
	tb.Helper()
	server := s.Identity(tb, "echo-kernel", callers.Catalog, "echo")
	client := s.Credentials(tb, s.Identity(tb, "echo-client", callers.Bridge, "echo-client"))
	env := []string{echoTLSEnv + "=" + strings.Join([]string{server.CA, server.Cert, server.Key}, string(os.PathListSeparator))}
	return startEcho(tb, env, client.DialOption(callers.Catalog))
}

func startEcho(tb testing.TB, env []string, dial grpc.DialOption) (sharedosv1.RuntimeServiceClient, int) {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(append(os.Environ(), echoEnv+"=1"), env...)
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
	cc, err := grpc.NewClient(strings.TrimSpace(addr), dial)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cc.Close() })
	return sharedosv1.NewRuntimeServiceClient(cc), cmd.Process.Pid
}
