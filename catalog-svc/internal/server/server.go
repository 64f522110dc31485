package server

import (
	"context"
	"log/slog"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"

	"github.com/sharedos/toolshare/catalog-svc/internal/catalog"
)

// MaxBatch bounds RegisterTools: one transaction, one cache reload.
const MaxBatch = 20000

// CatalogServer implements sharedosv1.CatalogServiceServer.
type CatalogServer struct {
	sharedosv1.UnimplementedCatalogServiceServer
	svc *catalog.Service
	log *slog.Logger
}

var _ sharedosv1.CatalogServiceServer = (*CatalogServer)(nil)

// NewCatalogServer returns the gRPC server over svc. Register it with
// sharedosv1.RegisterCatalogServiceServer.
func NewCatalogServer(svc *catalog.Service, log *slog.Logger) *CatalogServer {
	if log == nil {
		log = slog.Default()
	}
	return &CatalogServer{svc: svc, log: log}
}

// fail logs what a client will not see, then maps err.
func (s *CatalogServer) fail(ctx context.Context, method string, err error) error {
	st := ToStatus(err)
	switch status.Code(st) {
	case codes.Internal, codes.Unavailable:
		s.log.ErrorContext(ctx, "catalog request failed", "method", method, "err", err)
	}
	return st
}

// RegisterTool implements sharedosv1.CatalogServiceServer.
func (s *CatalogServer) RegisterTool(ctx context.Context, req *sharedosv1.RegisterToolRequest) (*sharedosv1.RegisterToolResponse, error) {
	if req.GetRegistration() == nil {
		return nil, InvalidArgument("registration", "required")
	}
	reg, pub, err := s.svc.Register(ctx, req.GetRegistration())
	if err != nil {
		return nil, s.fail(ctx, "RegisterTool", err)
	}
	return &sharedosv1.RegisterToolResponse{Registration: reg, Published: pub}, nil
}

// RegisterTools implements sharedosv1.CatalogServiceServer.
func (s *CatalogServer) RegisterTools(ctx context.Context, req *sharedosv1.RegisterToolsRequest) (*sharedosv1.RegisterToolsResponse, error) {
	if n := len(req.GetRegistrations()); n > MaxBatch {
		return nil, InvalidArgument("registrations", "at most 20000 per call")
	}
	n, err := s.svc.RegisterBatch(ctx, req.GetRegistrations())
	if err != nil {
		return nil, s.fail(ctx, "RegisterTools", err)
	}
	return &sharedosv1.RegisterToolsResponse{Registered: int32(n)}, nil
}

// UpdateTool implements sharedosv1.CatalogServiceServer.
func (s *CatalogServer) UpdateTool(ctx context.Context, req *sharedosv1.UpdateToolRequest) (*sharedosv1.UpdateToolResponse, error) {
	if req.GetRegistration() == nil {
		return nil, InvalidArgument("registration", "required")
	}
	reg, pub, err := s.svc.Update(ctx, req.GetRegistration(), req.GetExpectedRevision())
	if err != nil {
		return nil, s.fail(ctx, "UpdateTool", err)
	}
	return &sharedosv1.UpdateToolResponse{Registration: reg, Published: pub}, nil
}

// DeregisterTool implements sharedosv1.CatalogServiceServer.
func (s *CatalogServer) DeregisterTool(ctx context.Context, req *sharedosv1.DeregisterToolRequest) (*sharedosv1.DeregisterToolResponse, error) {
	if req.GetName() == "" {
		return nil, InvalidArgument("name", "required")
	}
	if err := s.svc.Deregister(ctx, req.GetName()); err != nil {
		return nil, s.fail(ctx, "DeregisterTool", err)
	}
	return &sharedosv1.DeregisterToolResponse{}, nil
}

// GetTool implements sharedosv1.CatalogServiceServer.
func (s *CatalogServer) GetTool(ctx context.Context, req *sharedosv1.GetToolRequest) (*sharedosv1.GetToolResponse, error) {
	if req.GetName() == "" {
		return nil, InvalidArgument("name", "required")
	}
	reg, pub, err := s.svc.Get(ctx, req.GetName())
	if err != nil {
		return nil, s.fail(ctx, "GetTool", err)
	}
	return &sharedosv1.GetToolResponse{Registration: reg, Published: pub}, nil
}

// ListRegistrations implements sharedosv1.CatalogServiceServer.
func (s *CatalogServer) ListRegistrations(ctx context.Context, req *sharedosv1.ListRegistrationsRequest) (*sharedosv1.ListRegistrationsResponse, error) {
	regs, next, err := s.svc.ListRegistrations(ctx, int(req.GetPageSize()), req.GetPageToken())
	if err != nil {
		return nil, s.fail(ctx, "ListRegistrations", err)
	}
	return &sharedosv1.ListRegistrationsResponse{Registrations: regs, NextPageToken: next}, nil
}

// ListTools implements sharedosv1.CatalogServiceServer.
func (s *CatalogServer) ListTools(ctx context.Context, req *sharedosv1.ListToolsRequest) (*sharedosv1.ListToolsResponse, error) {
	l, err := s.svc.ListTools(ctx, req.GetContext())
	if err != nil {
		return nil, s.fail(ctx, "ListTools", err)
	}
	return &sharedosv1.ListToolsResponse{Tools: l.Tools, CatalogHash: l.CatalogHash}, nil
}

// RegisterPrompt implements sharedosv1.CatalogServiceServer.
func (s *CatalogServer) RegisterPrompt(ctx context.Context, req *sharedosv1.RegisterPromptRequest) (*sharedosv1.RegisterPromptResponse, error) {
	if req.GetRegistration() == nil {
		return nil, InvalidArgument("registration", "required")
	}
	reg, pub, err := s.svc.RegisterPrompt(ctx, req.GetRegistration())
	if err != nil {
		return nil, s.fail(ctx, "RegisterPrompt", err)
	}
	return &sharedosv1.RegisterPromptResponse{Registration: reg, Published: pub}, nil
}

// DeregisterPrompt implements sharedosv1.CatalogServiceServer.
func (s *CatalogServer) DeregisterPrompt(ctx context.Context, req *sharedosv1.DeregisterPromptRequest) (*sharedosv1.DeregisterPromptResponse, error) {
	if req.GetName() == "" {
		return nil, InvalidArgument("name", "required")
	}
	if err := s.svc.DeregisterPrompt(ctx, req.GetName()); err != nil {
		return nil, s.fail(ctx, "DeregisterPrompt", err)
	}
	return &sharedosv1.DeregisterPromptResponse{}, nil
}

// ListPromptRegistrations implements sharedosv1.CatalogServiceServer.
func (s *CatalogServer) ListPromptRegistrations(ctx context.Context, _ *sharedosv1.ListPromptRegistrationsRequest) (*sharedosv1.ListPromptRegistrationsResponse, error) {
	regs, err := s.svc.PromptRegistrations(ctx)
	if err != nil {
		return nil, s.fail(ctx, "ListPromptRegistrations", err)
	}
	return &sharedosv1.ListPromptRegistrationsResponse{Registrations: regs}, nil
}

// RegisterResource implements sharedosv1.CatalogServiceServer.
func (s *CatalogServer) RegisterResource(ctx context.Context, req *sharedosv1.RegisterResourceRequest) (*sharedosv1.RegisterResourceResponse, error) {
	if req.GetRegistration() == nil {
		return nil, InvalidArgument("registration", "required")
	}
	reg, pub, err := s.svc.RegisterResource(ctx, req.GetRegistration())
	if err != nil {
		return nil, s.fail(ctx, "RegisterResource", err)
	}
	return &sharedosv1.RegisterResourceResponse{Registration: reg, Published: pub}, nil
}

// DeregisterResource implements sharedosv1.CatalogServiceServer.
func (s *CatalogServer) DeregisterResource(ctx context.Context, req *sharedosv1.DeregisterResourceRequest) (*sharedosv1.DeregisterResourceResponse, error) {
	if req.GetUri() == "" {
		return nil, InvalidArgument("uri", "required")
	}
	if err := s.svc.DeregisterResource(ctx, req.GetUri()); err != nil {
		return nil, s.fail(ctx, "DeregisterResource", err)
	}
	return &sharedosv1.DeregisterResourceResponse{}, nil
}

// ListResourceRegistrations implements sharedosv1.CatalogServiceServer.
func (s *CatalogServer) ListResourceRegistrations(ctx context.Context, _ *sharedosv1.ListResourceRegistrationsRequest) (*sharedosv1.ListResourceRegistrationsResponse, error) {
	regs, err := s.svc.ResourceRegistrations(ctx)
	if err != nil {
		return nil, s.fail(ctx, "ListResourceRegistrations", err)
	}
	return &sharedosv1.ListResourceRegistrationsResponse{Registrations: regs}, nil
}
