package grpcx_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sharedos/toolshare/services/platform/grpcx"
)

// probe is a hand-written service (no generated code needed) whose methods
// expose what the tests observe on the server side.
const probeService = "grpcx.test.Probe"

type probe struct {
	// entered is signalled when Slow starts; release lets it return.
	entered chan struct{}
	release chan struct{}
}

func (p *probe) deadline(ctx context.Context) (*durationpb.Duration, error) {
	dl, ok := ctx.Deadline()
	if !ok {
		return nil, status.Error(codes.FailedPrecondition, "no deadline")
	}
	return durationpb.New(time.Until(dl)), nil
}

func (p *probe) slow(ctx context.Context) (*wrapperspb.StringValue, error) {
	p.entered <- struct{}{}
	select {
	case <-p.release:
		return wrapperspb.String("finished"), nil
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
}

// trace answers the trace context the call arrived with: "<trace id>
// <span id> remote", or "none".
func (p *probe) trace(ctx context.Context) (*wrapperspb.StringValue, error) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return wrapperspb.String("none"), nil
	}
	return wrapperspb.String(fmt.Sprintf("%s %s remote=%t", sc.TraceID(), sc.SpanID(), sc.IsRemote())), nil
}

func unary[Resp any](f func(ctx context.Context) (Resp, error)) grpc.MethodHandler {
	return func(srv any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
		if err := dec(new(emptypb.Empty)); err != nil {
			return nil, err
		}
		info := &grpc.UnaryServerInfo{Server: srv}
		h := func(ctx context.Context, _ any) (any, error) { return f(ctx) }
		if icpt == nil {
			return h(ctx, nil)
		}
		return icpt(ctx, new(emptypb.Empty), info, h)
	}
}

// size answers how many bytes the BytesValue it was sent holds.
func size(_ any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
	in := new(wrapperspb.BytesValue)
	if err := dec(in); err != nil {
		return nil, err
	}
	h := func(context.Context, any) (any, error) { return wrapperspb.Int64(int64(len(in.GetValue()))), nil }
	if icpt == nil {
		return h(ctx, in)
	}
	return icpt(ctx, in, &grpc.UnaryServerInfo{}, h)
}

func (p *probe) desc() *grpc.ServiceDesc {
	return &grpc.ServiceDesc{
		ServiceName: probeService,
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{
			{MethodName: "Panic", Handler: unary(func(context.Context) (*emptypb.Empty, error) { panic("secret panic detail") })},
			{MethodName: "Deadline", Handler: unary(p.deadline)},
			{MethodName: "Slow", Handler: unary(p.slow)},
			{MethodName: "Trace", Handler: unary(p.trace)},
			{MethodName: "Size", Handler: size},
		},
		Streams: []grpc.StreamDesc{{
			StreamName:    "PanicStream",
			ServerStreams: true,
			Handler:       func(any, grpc.ServerStream) error { panic("stream panic") },
		}},
	}
}

type fixture struct {
	srv    *grpcx.Server
	probe  *probe
	cc     *grpc.ClientConn
	cancel context.CancelFunc
	served chan error
	logs   *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func start(t *testing.T, opts grpcx.ServerOptions, dial ...grpc.DialOption) *fixture {
	t.Helper()
	f := &fixture{
		probe:  &probe{entered: make(chan struct{}, 1), release: make(chan struct{})},
		served: make(chan error, 1),
		logs:   &syncBuffer{},
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewJSONHandler(f.logs, nil))
	}
	f.srv = grpcx.NewServer(opts)
	f.srv.GRPC().RegisterService(f.probe.desc(), f.probe)

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	go func() { f.served <- f.srv.Serve(ctx, lis) }()

	f.cc, err = grpcx.Dial(lis.Addr().String(), dial...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = f.cc.Close()
	})
	return f
}

// stop cancels Serve's context and returns Serve's result.
func (f *fixture) stop() error {
	f.cancel()
	return <-f.served
}

func (f *fixture) call(ctx context.Context, method string, reply any) error {
	return f.cc.Invoke(ctx, "/"+probeService+"/"+method, new(emptypb.Empty), reply)
}

func check(t *testing.T, cc *grpc.ClientConn, service string) healthpb.HealthCheckResponse_ServingStatus {
	t.Helper()
	resp, err := healthpb.NewHealthClient(cc).Check(context.Background(), &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		t.Fatalf("health check %q: %v", service, err)
	}
	return resp.GetStatus()
}

func TestHealthServingUntilShutdown(t *testing.T) {
	f := start(t, grpcx.ServerOptions{ServiceName: "test"})

	if got := check(t, f.cc, ""); got != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("overall health = %v, want SERVING", got)
	}
	// Registered services are SERVING without any health code of their own.
	if got := check(t, f.cc, probeService); got != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("%s health = %v, want SERVING", probeService, got)
	}
	f.srv.SetServing("custom", false)
	if got := check(t, f.cc, "custom"); got != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("custom health = %v, want NOT_SERVING", got)
	}
	f.srv.SetServing("custom", true)
	if got := check(t, f.cc, "custom"); got != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("custom health = %v, want SERVING", got)
	}
	_, err := healthpb.NewHealthClient(f.cc).Check(context.Background(), &healthpb.HealthCheckRequest{Service: "nope"})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("unknown service: got %v, want NotFound", err)
	}

	// Watch sees SERVING, then NOT_SERVING when shutdown starts, and then
	// the stream ends cleanly instead of holding up the drain.
	watch, err := healthpb.NewHealthClient(f.cc).Watch(context.Background(), &healthpb.HealthCheckRequest{Service: ""})
	if err != nil {
		t.Fatal(err)
	}
	first, err := watch.Recv()
	if err != nil || first.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("first watch status = %v, %v; want SERVING", first.GetStatus(), err)
	}

	f.cancel()
	second, err := watch.Recv()
	if err != nil || second.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("watch status after shutdown = %v, %v; want NOT_SERVING", second.GetStatus(), err)
	}
	if _, err := watch.Recv(); err != io.EOF {
		t.Fatalf("watch after NOT_SERVING: got %v, want io.EOF (stream ended OK)", err)
	}
	if err := <-f.served; err != nil {
		t.Fatalf("Serve after shutdown = %v, want nil", err)
	}
	// A draining server never claims SERVING again.
	f.srv.SetServing("", true)
}

func TestPanicBecomesInternal(t *testing.T) {
	f := start(t, grpcx.ServerOptions{ServiceName: "test"})

	err := f.call(context.Background(), "Panic", new(emptypb.Empty))
	st := status.Convert(err)
	if st.Code() != codes.Internal || st.Message() != "internal error" {
		t.Fatalf("unary panic: got %v, want Internal \"internal error\"", err)
	}
	stream, err := f.cc.NewStream(context.Background(), &grpc.StreamDesc{ServerStreams: true}, "/"+probeService+"/PanicStream")
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.SendMsg(new(emptypb.Empty)); err != nil {
		t.Fatal(err)
	}
	_ = stream.CloseSend()
	err = stream.RecvMsg(new(emptypb.Empty))
	st = status.Convert(err)
	if st.Code() != codes.Internal || st.Message() != "internal error" {
		t.Fatalf("stream panic: got %v, want Internal \"internal error\"", err)
	}
	// The server keeps serving after a panic.
	if got := check(t, f.cc, ""); got != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health after panic = %v", got)
	}
	logs := f.logs.String()
	for _, want := range []string{"secret panic detail", "stream panic", "/" + probeService + "/Panic", "goroutine"} {
		if !strings.Contains(logs, want) {
			t.Errorf("panic log lacks %q:\n%s", want, logs)
		}
	}
	if err := f.stop(); err != nil {
		t.Fatal(err)
	}
}

func TestDefaultDeadline(t *testing.T) {
	f := start(t, grpcx.ServerOptions{})
	var left durationpb.Duration

	if err := f.call(context.Background(), "Deadline", &left); err != nil {
		t.Fatalf("call without deadline: %v (the client should have added one)", err)
	}
	if d := left.AsDuration(); d <= 0 || d > grpcx.DefaultTimeout {
		t.Fatalf("server saw %v left, want within (0, %v]", d, grpcx.DefaultTimeout)
	}

	// A caller's own deadline wins over the default, even a longer one.
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	if err := f.call(ctx, "Deadline", &left); err != nil {
		t.Fatal(err)
	}
	if d := left.AsDuration(); d <= grpcx.DefaultTimeout {
		t.Fatalf("server saw %v left, want the caller's hour-long deadline", d)
	}
}

func TestWithDefaultTimeout(t *testing.T) {
	f := start(t, grpcx.ServerOptions{}, grpcx.WithDefaultTimeout(time.Hour))
	var left durationpb.Duration
	if err := f.call(context.Background(), "Deadline", &left); err != nil {
		t.Fatal(err)
	}
	if d := left.AsDuration(); d <= grpcx.DefaultTimeout || d > time.Hour {
		t.Fatalf("server saw %v left, want the configured hour", d)
	}

	off := start(t, grpcx.ServerOptions{}, grpcx.WithDefaultTimeout(0))
	err := off.call(context.Background(), "Deadline", &left)
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("with the default deadline off: got %v, want the server's no-deadline answer", err)
	}
}

func TestReflectionListsServices(t *testing.T) {
	f := start(t, grpcx.ServerOptions{Plane: grpcx.Plane{Reflection: true}})
	stream, err := reflectionpb.NewServerReflectionClient(f.cc).ServerReflectionInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{
		MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{},
	}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	_ = stream.CloseSend()
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	for _, want := range []string{probeService, "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection"} {
		if !slices.Contains(names, want) {
			t.Errorf("reflection lists %v, missing %s", names, want)
		}
	}
}

// Reflection is off unless asked for (--reflection).
func TestReflectionOffByDefault(t *testing.T) {
	f := start(t, grpcx.ServerOptions{})
	stream, err := reflectionpb.NewServerReflectionClient(f.cc).ServerReflectionInfo(context.Background())
	if err == nil {
		_ = stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}})
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("reflection without Reflection: %v, want Unimplemented", err)
	}
}

func TestGracefulStopFinishesInFlight(t *testing.T) {
	f := start(t, grpcx.ServerOptions{DrainTimeout: time.Minute})

	var reply wrapperspb.StringValue
	done := make(chan error, 1)
	go func() { done <- f.call(context.Background(), "Slow", &reply) }()
	<-f.probe.entered

	f.cancel()
	// Shutdown has begun once health says so; the in-flight call is still
	// running and Serve is still draining.
	waitNotServing(t, f)
	select {
	case err := <-f.served:
		t.Fatalf("Serve returned %v while an RPC was in flight", err)
	default:
	}

	close(f.probe.release)
	if err := <-done; err != nil || reply.GetValue() != "finished" {
		t.Fatalf("in-flight call = %q, %v; want it to finish", reply.GetValue(), err)
	}
	if err := <-f.served; err != nil {
		t.Fatalf("Serve = %v, want nil", err)
	}
}

// waitNotServing polls Check on a fresh connection (the fixture's has been
// sent GOAWAY) until the server reports NOT_SERVING.
func waitNotServing(t *testing.T, f *fixture) {
	t.Helper()
	for {
		// Check is answered on the existing connection as long as the
		// server is draining; once GOAWAY arrived new RPCs fail with
		// Unavailable, which also proves shutdown began.
		resp, err := healthpb.NewHealthClient(f.cc).Check(context.Background(), &healthpb.HealthCheckRequest{})
		if err != nil || resp.GetStatus() == healthpb.HealthCheckResponse_NOT_SERVING {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestDrainTimeoutForcesStop(t *testing.T) {
	f := start(t, grpcx.ServerOptions{DrainTimeout: 50 * time.Millisecond})

	done := make(chan error, 1)
	go func() { done <- f.call(context.Background(), "Slow", new(wrapperspb.StringValue)) }()
	<-f.probe.entered

	// The handler never finishes on its own; Stop must cancel it.
	if err := f.stop(); err != nil {
		t.Fatalf("Serve = %v, want nil", err)
	}
	err := <-done
	if code := status.Code(err); code != codes.Unavailable && code != codes.Canceled {
		t.Fatalf("force-stopped call: got %v, want Unavailable or Canceled", err)
	}
	if !strings.Contains(f.logs.String(), "drain timed out") {
		t.Errorf("no drain timeout log:\n%s", f.logs.String())
	}
}

func TestServeReturnsListenerError(t *testing.T) {
	srv := grpcx.NewServer(grpcx.ServerOptions{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_ = lis.Close()
	err = srv.Serve(context.Background(), lis)
	if err == nil || !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Serve on a closed listener = %v, want an error wrapping net.ErrClosed", err)
	}
}

func TestServeWithCancelledContext(t *testing.T) {
	srv := grpcx.NewServer(grpcx.ServerOptions{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := srv.Serve(ctx, lis); err != nil {
		t.Fatalf("Serve with a done context = %v, want nil", err)
	}
}

func TestKeepaliveClientWithinServerPolicy(t *testing.T) {
	// Clients pinging more often than the server's MinTime get GOAWAY
	// "too_many_pings"; the two constants must stay in this order.
	if grpcx.ClientKeepaliveTime < grpcx.KeepaliveMinTime {
		t.Fatalf("client pings every %v but the server tolerates no less than %v", grpcx.ClientKeepaliveTime, grpcx.KeepaliveMinTime)
	}
}

// A server takes messages past grpc-go's default 4 MiB (it is set to take
// MaxMessageSize, what Dial's clients send; 5 and 9 MiB are tried): an InvokeTool carrying a request body just under
// the bridge's 4 MiB cap, with its grant, was refused before the kernel
// could record it.
func TestServerTakesMessagesOverFourMiB(t *testing.T) {
	f := start(t, grpcx.ServerOptions{})
	// A bound on failure, not a wait: megabytes under -race on a busy
	// machine outlast Dial's default deadline.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, n := range []int{5 << 20, 9 << 20} {
		got := new(wrapperspb.Int64Value)
		if err := f.cc.Invoke(ctx, "/"+probeService+"/Size", wrapperspb.Bytes(make([]byte, n)), got); err != nil || got.GetValue() != int64(n) {
			t.Errorf("a message of %d bytes: %v (the server saw %d)", n, err, got.GetValue())
		}
	}
}
