package grpcx

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	"github.com/sharedos/toolshare/services/platform/mtls"
)

// DefaultDrainTimeout bounds GracefulStop when ServerOptions.DrainTimeout is
// zero. It stays well below Kubernetes' default terminationGracePeriodSeconds
// (30 s) so that a preStop sleep plus the drain still finish before SIGKILL.
const DefaultDrainTimeout = 10 * time.Second

// KeepaliveMinTime is the shortest client ping interval the server accepts.
// It must stay at or below ClientKeepaliveTime, or clients built by Dial get
// GOAWAY "too_many_pings" on idle connections.
const KeepaliveMinTime = 10 * time.Second

// MaxConnectionAge and MaxConnectionAgeGrace bound how long a client keeps
// one connection (and so one pod): the grace is longer than the longest
// InvokeTool (authorization plus the 5-minute handler cap).
const (
	MaxConnectionAge      = 10 * time.Minute
	MaxConnectionAgeGrace = 6 * time.Minute
)

// StreamWorkers is the number of goroutines every server keeps to run
// RPCs (grpc.NumStreamWorkers). Without them each RPC starts on a fresh
// goroutine whose small stack grows again on every call — the kernel's
// pipeline, OPA's evaluator and the TLS record layer are deep — which the
// c=16 profiles showed as 6–9 % of each service's CPU in runtime.newstack
// and copystack. A worker keeps its grown stack; when all are busy an RPC
// gets its own goroutine as before.
const StreamWorkers = 64

// ServerOptions configures NewServer.
type ServerOptions struct {
	// ServiceName names the process (for example "sharedos-catalog") in logs.
	ServiceName string
	// Logger receives recovered panics and shutdown events; nil means slog.Default().
	Logger *slog.Logger
	// DrainTimeout bounds how long Serve lets in-flight RPCs finish after its
	// context is done before it force-stops the server; zero means
	// DefaultDrainTimeout.
	DrainTimeout time.Duration
	// Plane is the internal plane's transport (zero: plaintext).
	Plane Plane
}

// Plane is how a process takes part in the internal gRPC plane
// (runner.Command.Plane binds it from the command line for every binary).
type Plane struct {
	// TLS is the transport security (mtls.Plaintext() when nil): with
	// mutual TLS every method's caller is admitted by the callers table
	// before its handler runs.
	TLS *mtls.Credentials
	// Reflection serves gRPC reflection (off by default: --reflection).
	Reflection bool
	// HealthListen, when set, serves grpc.health.v1 alone, in plaintext, on
	// this address: kubelet gRPC probes speak no TLS, and health answers
	// nothing but SERVING / NOT_SERVING.
	HealthListen string
}

// Server is a grpc.Server wired with health, reflection, tracing, recovery
// and keepalive enforcement. Register services on GRPC() before Serve.
type Server struct {
	grpc *grpc.Server
	tls  *mtls.Credentials
	// probe serves health alone on probeAt (Plane.HealthListen).
	probe   *grpc.Server
	probeAt string
	health  *drainingHealth
	logger  *slog.Logger
	drain   time.Duration

	mu sync.Mutex
	// explicit holds the services whose health the owner set through
	// SetServing; Serve marks every other registered service SERVING.
	explicit map[string]bool
}

// NewServer returns a Server. extra options are applied after the defaults,
// so a caller may add interceptors (they run after panic recovery) or
// override limits.
func NewServer(opts ServerOptions, extra ...grpc.ServerOption) *Server {
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	if opts.ServiceName != "" {
		logger = logger.With(slog.String("service", opts.ServiceName))
	}
	drain := opts.DrainTimeout
	if drain <= 0 {
		drain = DefaultDrainTimeout
	}

	unary := []grpc.UnaryServerInterceptor{recoverUnary(logger)}
	stream := []grpc.StreamServerInterceptor{recoverStream(logger)}
	var transport []grpc.ServerOption
	if !opts.Plane.TLS.Plaintext() {
		az := mtls.NewAuthorizer(logger)
		unary, stream = append(unary, az.Unary), append(stream, az.Stream)
		transport = opts.Plane.TLS.ServerOptions()
	}
	base := []grpc.ServerOption{
		grpc.StatsHandler(newServerTelemetry()), // telemetry.go
		grpc.ChainUnaryInterceptor(unary...),
		grpc.ChainStreamInterceptor(stream...),
		// Connections are recycled now and then so clients re-resolve and
		// spread over new pods; the grace outlasts the longest tool call.
		grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionAge:      MaxConnectionAge,
			MaxConnectionAgeGrace: MaxConnectionAgeGrace,
		}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime:             KeepaliveMinTime,
			PermitWithoutStream: true,
		}),
		grpc.NumStreamWorkers(StreamWorkers),
		// What Dial's clients may send (an InvokeTool carries up to the
		// bridge's body cap plus its grant); every caller is authenticated.
		grpc.MaxRecvMsgSize(MaxMessageSize),
	}
	gs := grpc.NewServer(append(append(base, transport...), extra...)...)

	hs := newDrainingHealth() // overall "" starts SERVING
	healthpb.RegisterHealthServer(gs, hs)
	if opts.Plane.Reflection {
		reflection.Register(gs)
	}
	var probe *grpc.Server
	if opts.Plane.HealthListen != "" {
		probe = grpc.NewServer()
		healthpb.RegisterHealthServer(probe, hs)
	}

	return &Server{
		grpc:     gs,
		tls:      opts.Plane.TLS,
		probe:    probe,
		probeAt:  opts.Plane.HealthListen,
		health:   hs,
		logger:   logger,
		drain:    drain,
		explicit: make(map[string]bool),
	}
}

// Close stops the server at once and releases its stream workers. An owner
// that built a Server calls it on every path where Serve will not run (a
// later step of its setup failed, a test that never serves); after Serve it
// does nothing more.
func (s *Server) Close() { s.grpc.Stop() }

// GRPC returns the underlying server for service registration.
func (s *Server) GRPC() *grpc.Server { return s.grpc }

// SetServing sets the health status of service ("" is the whole server).
// After shutdown has begun the call has no effect: a draining server never
// reports SERVING again.
func (s *Server) SetServing(service string, serving bool) {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if serving {
		st = healthpb.HealthCheckResponse_SERVING
	}
	s.mu.Lock()
	s.explicit[service] = true
	s.mu.Unlock()
	s.health.SetServingStatus(service, st)
}

// Serve serves on lis until ctx is done, then shuts down: every health status
// becomes NOT_SERVING, GracefulStop lets in-flight RPCs finish for up to the
// drain timeout, and Stop cancels whatever is still running. It returns nil
// after a shutdown caused by ctx, and the serve error otherwise.
//
// Services registered on GRPC() whose health was never set with SetServing
// are reported SERVING when Serve starts, so a service that has no readiness
// condition of its own needs no health code. A plaintext server refuses a
// listener that is not on loopback; Plane.HealthListen is served alongside.
func (s *Server) Serve(ctx context.Context, lis net.Listener) error {
	if err := s.tls.CheckListener(lis.Addr().String()); err != nil {
		return err
	}
	if s.probe != nil {
		plis, err := net.Listen("tcp", s.probeAt)
		if err != nil {
			return fmt.Errorf("grpcx: health listener %s: %w", s.probeAt, err)
		}
		go func() { _ = s.probe.Serve(plis) }()
		defer s.probe.Stop()
	}
	s.markRegisteredServing()

	served := make(chan error, 1)
	go func() { served <- s.grpc.Serve(lis) }()

	select {
	case err := <-served:
		// The listener failed on its own; nothing is in flight worth draining.
		s.health.shutdown()
		s.grpc.Stop()
		if err == nil || errors.Is(err, grpc.ErrServerStopped) {
			return nil
		}
		return fmt.Errorf("grpcx: serve %s: %w", lis.Addr(), err)
	case <-ctx.Done():
	}

	s.health.shutdown()
	s.logger.Info("grpc server draining", slog.Duration("drain_timeout", s.drain))

	stopped := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(stopped)
	}()
	timer := time.NewTimer(s.drain)
	defer timer.Stop()
	select {
	case <-stopped:
	case <-timer.C:
		s.logger.Warn("grpc drain timed out; cancelling in-flight RPCs", slog.Duration("drain_timeout", s.drain))
		s.grpc.Stop()
		<-stopped
	}

	// Serve returns nil once GracefulStop/Stop ran, or ErrServerStopped when
	// ctx was already done before the serving goroutine got going.
	if err := <-served; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return fmt.Errorf("grpcx: serve %s: %w", lis.Addr(), err)
	}
	return nil
}

func (s *Server) markRegisteredServing() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name := range s.grpc.GetServiceInfo() {
		// Health and reflection are infrastructure, not services a client
		// would ask about.
		if s.explicit[name] || strings.HasPrefix(name, "grpc.health.") || strings.HasPrefix(name, "grpc.reflection.") {
			continue
		}
		s.health.SetServingStatus(name, healthpb.HealthCheckResponse_SERVING)
	}
}

// errInternal is the only thing a client learns about a panic.
var errInternal = status.Error(codes.Internal, "internal error")

func recoverUnary(logger *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
		defer func() {
			if r := recover(); r != nil {
				logPanic(ctx, logger, info.FullMethod, r)
				resp, err = nil, errInternal
			}
		}()
		return handler(ctx, req)
	}
}

func recoverStream(logger *slog.Logger) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
		defer func() {
			if r := recover(); r != nil {
				logPanic(ss.Context(), logger, info.FullMethod, r)
				err = errInternal
			}
		}()
		return handler(srv, ss)
	}
}

func logPanic(ctx context.Context, logger *slog.Logger, method string, r any) {
	logger.ErrorContext(ctx, "panic in gRPC handler",
		slog.String("grpc.method", method),
		slog.Any("panic", r),
		slog.String("stack", string(debug.Stack())),
	)
}
