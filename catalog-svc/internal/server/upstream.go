package server

import (
	"context"
	"log/slog"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/platform/mtls"

	"github.com/sharedos/toolshare/catalog-svc/internal/upstream"
)

// UpstreamServer implements sharedosv1.UpstreamServiceServer (ADR 0019).
type UpstreamServer struct {
	sharedosv1.UnimplementedUpstreamServiceServer
	m   *upstream.Manager
	log *slog.Logger
}

var _ sharedosv1.UpstreamServiceServer = (*UpstreamServer)(nil)

// NewUpstreamServer returns the gRPC server over m.
func NewUpstreamServer(m *upstream.Manager, log *slog.Logger) *UpstreamServer {
	if log == nil {
		log = slog.Default()
	}
	return &UpstreamServer{m: m, log: log}
}

func (s *UpstreamServer) fail(ctx context.Context, method string, err error) error {
	st := ToStatus(err)
	switch status.Code(st) {
	case codes.Internal, codes.Unavailable:
		s.log.ErrorContext(ctx, "upstream request failed", "method", method, "err", err)
	}
	return st
}

// actor is who asks: the caller's SPIFFE ID (every caller of this service
// is an authenticated operator), or "operator" on a plaintext plane.
func actor(ctx context.Context) string {
	if id, ok := mtls.PeerIdentity(ctx); ok {
		return id.String()
	}
	return "operator"
}

// AddProvider implements sharedosv1.UpstreamServiceServer.
func (s *UpstreamServer) AddProvider(ctx context.Context, req *sharedosv1.AddProviderRequest) (*sharedosv1.AddProviderResponse, error) {
	if req.GetProvider() == nil {
		return nil, InvalidArgument("provider", "required")
	}
	rec, err := s.m.Add(ctx, req.GetProvider(), actor(ctx))
	if err != nil {
		return nil, s.fail(ctx, "AddProvider", err)
	}
	return &sharedosv1.AddProviderResponse{Provider: rec.GetProvider(), Status: rec.GetStatus()}, nil
}

// ListProviders implements sharedosv1.UpstreamServiceServer.
func (s *UpstreamServer) ListProviders(ctx context.Context, _ *sharedosv1.ListProvidersRequest) (*sharedosv1.ListProvidersResponse, error) {
	recs, err := s.m.List(ctx)
	if err != nil {
		return nil, s.fail(ctx, "ListProviders", err)
	}
	return &sharedosv1.ListProvidersResponse{Providers: recs}, nil
}

// GetProvider implements sharedosv1.UpstreamServiceServer.
func (s *UpstreamServer) GetProvider(ctx context.Context, req *sharedosv1.GetProviderRequest) (*sharedosv1.GetProviderResponse, error) {
	rec, err := s.m.Get(ctx, req.GetNamespace())
	if err != nil {
		return nil, s.fail(ctx, "GetProvider", err)
	}
	return rec, nil
}

// RefreshProvider implements sharedosv1.UpstreamServiceServer.
func (s *UpstreamServer) RefreshProvider(ctx context.Context, req *sharedosv1.RefreshProviderRequest) (*sharedosv1.RefreshProviderResponse, error) {
	rec, err := s.m.Refresh(ctx, req.GetNamespace(), actor(ctx))
	if err != nil {
		return nil, s.fail(ctx, "RefreshProvider", err)
	}
	return &sharedosv1.RefreshProviderResponse{Provider: rec.GetProvider(), Status: rec.GetStatus()}, nil
}

// RemoveProvider implements sharedosv1.UpstreamServiceServer.
func (s *UpstreamServer) RemoveProvider(ctx context.Context, req *sharedosv1.RemoveProviderRequest) (*sharedosv1.RemoveProviderResponse, error) {
	if err := s.m.Remove(ctx, req.GetNamespace()); err != nil {
		return nil, s.fail(ctx, "RemoveProvider", err)
	}
	return &sharedosv1.RemoveProviderResponse{}, nil
}

// ApproveTool implements sharedosv1.UpstreamServiceServer.
func (s *UpstreamServer) ApproveTool(ctx context.Context, req *sharedosv1.ApproveToolRequest) (*sharedosv1.ApproveToolResponse, error) {
	t, err := s.m.Approve(ctx, req.GetName(), req.GetDigest(), actor(ctx))
	if err != nil {
		return nil, s.fail(ctx, "ApproveTool", err)
	}
	return &sharedosv1.ApproveToolResponse{Tool: t}, nil
}

// RejectTool implements sharedosv1.UpstreamServiceServer.
func (s *UpstreamServer) RejectTool(ctx context.Context, req *sharedosv1.RejectToolRequest) (*sharedosv1.RejectToolResponse, error) {
	t, err := s.m.Reject(ctx, req.GetName(), req.GetDigest(), actor(ctx))
	if err != nil {
		return nil, s.fail(ctx, "RejectTool", err)
	}
	return &sharedosv1.RejectToolResponse{Tool: t}, nil
}

// DiffTool implements sharedosv1.UpstreamServiceServer.
func (s *UpstreamServer) DiffTool(ctx context.Context, req *sharedosv1.DiffToolRequest) (*sharedosv1.DiffToolResponse, error) {
	t, d, err := s.m.Diff(ctx, req.GetName())
	if err != nil {
		return nil, s.fail(ctx, "DiffTool", err)
	}
	return &sharedosv1.DiffToolResponse{Tool: t, Diff: d}, nil
}
