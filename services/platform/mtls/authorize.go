package mtls

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sharedos/toolshare/services/contract/callers"
	"github.com/sharedos/toolshare/services/platform/telemetry"
)

// Authorizer admits each RPC's caller by the callers table. It runs before
// any handler: a refused call runs nothing, is logged and counted.
type Authorizer struct {
	logger *slog.Logger
	denied metric.Int64Counter
}

// NewAuthorizer returns the interceptor pair's owner.
func NewAuthorizer(logger *slog.Logger) *Authorizer {
	c, err := otel.Meter(telemetry.ScopePlatform).Int64Counter(telemetry.MetricCallerDenied,
		metric.WithDescription("internal RPCs refused because the caller's role may not call the method"))
	if err != nil {
		logger.Error("caller-denied counter", slog.Any("error", err))
	}
	return &Authorizer{logger: logger, denied: c}
}

// check returns nil when the caller in ctx may call method.
func (a *Authorizer) check(ctx context.Context, method string) error {
	if callers.Open(method) {
		return nil
	}
	id, ok := PeerIdentity(ctx)
	if !ok {
		return a.refuse(ctx, method, "", status.Errorf(codes.Unauthenticated,
			"%s needs a caller identity (a client certificate)", method))
	}
	if strings.HasPrefix(method, callers.Reflection) || callers.May(id.Role, method) {
		return nil
	}
	allowed := callers.Allowed(method)
	msg := fmt.Sprintf("%s (role %s) may not call %s", id, id.Role, method)
	if len(allowed) > 0 {
		msg += fmt.Sprintf("; it is for %v", allowed)
	} else {
		msg += "; no role may"
	}
	return a.refuse(ctx, method, id.String(), status.Error(codes.PermissionDenied, msg))
}

func (a *Authorizer) refuse(ctx context.Context, method, caller string, err error) error {
	a.logger.WarnContext(ctx, "caller refused", slog.String(telemetry.LogRPCMethod, method),
		slog.String(telemetry.LogCaller, caller), slog.String("reason", status.Convert(err).Message()))
	if a.denied != nil {
		a.denied.Add(ctx, 1, metric.WithAttributes(attribute.String(telemetry.AttrRPCMethod, method)))
	}
	return err
}

// Unary is the unary server interceptor.
func (a *Authorizer) Unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if err := a.check(ctx, info.FullMethod); err != nil {
		return nil, err
	}
	return h(ctx, req)
}

// Stream is the stream server interceptor.
func (a *Authorizer) Stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if err := a.check(ss.Context(), info.FullMethod); err != nil {
		return err
	}
	return h(srv, ss)
}
