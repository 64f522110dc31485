package grpcx

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
)

// DefaultTimeout is the deadline Dial's connections give a unary call whose
// context carries none.
const DefaultTimeout = 10 * time.Second

// MaxMessageSize bounds sent and received messages on Dial's connections;
// tool results (file contents, listings) can exceed gRPC's 4 MiB default.
const MaxMessageSize = 64 << 20

// ClientKeepaliveTime is how often an idle client connection pings the server.
// It must stay at or above KeepaliveMinTime (the server's enforcement floor).
const ClientKeepaliveTime = 20 * time.Second

// Dial creates a client connection (grpc.NewClient: no I/O until the first
// RPC) with plaintext credentials, tracing, keepalive pings, 64 MiB message
// limits, a default deadline for unary calls and retries disabled. opts are
// applied after these defaults.
func Dial(target string, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	base := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithStatsHandler(newClientTelemetry()), // telemetry.go
		grpc.WithChainUnaryInterceptor(defaultDeadline),
		grpc.WithDefaultCallOptions(
			grpc.MaxCallRecvMsgSize(MaxMessageSize),
			grpc.MaxCallSendMsgSize(MaxMessageSize),
		),
		// Retries could replay an InvokeTool that already reached a handler;
		// callers that want retries decide per call, knowing the semantics.
		grpc.WithDisableRetry(),
		// Spread calls over every address a name resolves to (headless
		// Services in Kubernetes), so pods added by an autoscaler get traffic;
		// the calls of a context with an Affinity stay on one (affinity.go).
		grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"` + BalancerName + `":{}}]}`),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{
			Time:                ClientKeepaliveTime,
			Timeout:             10 * time.Second,
			PermitWithoutStream: true,
		}),
	}
	cc, err := grpc.NewClient(target, append(base, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("grpcx: dial %q: %w", target, err)
	}
	return cc, nil
}

// WithDefaultTimeout replaces DefaultTimeout for a connection made by Dial;
// d <= 0 turns the default deadline off. It occupies grpc.WithUnaryInterceptor
// (which runs before chained interceptors), so do not combine it with another
// grpc.WithUnaryInterceptor; use grpc.WithChainUnaryInterceptor instead.
func WithDefaultTimeout(d time.Duration) grpc.DialOption {
	return grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		return invoker(context.WithValue(ctx, timeoutKey{}, d), method, req, reply, cc, opts...)
	})
}

type timeoutKey struct{}

// defaultDeadline gives a unary call a deadline when its context has none.
// Streams get none: they are long-lived by design and their owners cancel them.
func defaultDeadline(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if _, ok := ctx.Deadline(); ok {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	d := DefaultTimeout
	if v, ok := ctx.Value(timeoutKey{}).(time.Duration); ok {
		d = v
	}
	if d <= 0 {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return invoker(ctx, method, req, reply, cc, opts...)
}
