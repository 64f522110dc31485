package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/toolname"

	"github.com/sharedos/toolshare/catalog-svc/internal/catalog"
	"github.com/sharedos/toolshare/catalog-svc/internal/upstream"
)

// MaxBatch bounds RegisterTools: one transaction, one cache reload.
// sharedosctl tools register refuses a longer file before sending it
// (its maxRegisterBatch), and the RPC's documentation states it.
const MaxBatch = 20000

// CatalogServer implements sharedosv1.CatalogServiceServer.
type CatalogServer struct {
	sharedosv1.UnimplementedCatalogServiceServer
	svc       *catalog.Service
	providers Providers
	log       *slog.Logger
}

// Providers tells which upstream provider holds a namespace (the upstream
// manager, ADR 0019), and lends its lock: held over the checks that an
// entry or a namespace is not an upstream's and the change they allow, so
// no acquisition, approval or provider added falls between them.
type Providers interface {
	// Holder returns the namespace of the provider that holds ns, compared
	// as tool names are (toolname.FoldedKey): ns itself or another
	// spelling of it; "" when none does.
	Holder(ctx context.Context, ns string) (string, error)
	// Exclusive takes the lock the upstream manager changes its entries
	// and providers under (across replicas); the func lets it go.
	Exclusive(ctx context.Context) (func(), error)
}

// changing takes the providers' lock for one change and its checks.
func (s *CatalogServer) changing(ctx context.Context, method string) (func(), error) {
	if s.providers == nil {
		return func() {}, nil
	}
	done, err := s.providers.Exclusive(ctx)
	if err != nil {
		return nil, s.fail(ctx, method, err)
	}
	return done, nil
}

var _ sharedosv1.CatalogServiceServer = (*CatalogServer)(nil)

// NewCatalogServer returns the gRPC server over svc, which registers no
// tool or prompt in a namespace one of providers holds. Register it with
// sharedosv1.RegisterCatalogServiceServer.
func NewCatalogServer(svc *catalog.Service, providers Providers, log *slog.Logger) *CatalogServer {
	if log == nil {
		log = slog.Default()
	}
	return &CatalogServer{svc: svc, providers: providers, log: log}
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
	done, err := s.changing(ctx, "RegisterTool")
	if err != nil {
		return nil, err
	}
	defer done()
	if err := notAcquiredSource("registration.metadata.source", req.GetRegistration().GetMetadata()); err != nil {
		return nil, err
	}
	if err := s.notProviderNamespace(ctx, "RegisterTool", "tool", req.GetRegistration().GetName()); err != nil {
		return nil, err
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
		return nil, InvalidArgument("registrations", fmt.Sprintf("at most %d per call", MaxBatch))
	}
	done, err := s.changing(ctx, "RegisterTools")
	if err != nil {
		return nil, err
	}
	defer done()
	checked := map[string]bool{}
	for i, reg := range req.GetRegistrations() {
		if err := notAcquiredSource(fmt.Sprintf("registrations[%d].metadata.source", i), reg.GetMetadata()); err != nil {
			return nil, err
		}
		if ns := namespaceOf(reg.GetName()); !checked[ns] {
			checked[ns] = true
			if err := s.notProviderNamespace(ctx, "RegisterTools", "tool", reg.GetName()); err != nil {
				return nil, err
			}
		}
	}
	stored, err := s.svc.RegisterBatch(ctx, req.GetRegistrations())
	if err != nil {
		return nil, s.fail(ctx, "RegisterTools", err)
	}
	resp := &sharedosv1.RegisterToolsResponse{Registered: int32(len(stored)), Revisions: make([]int64, len(stored))}
	for i, r := range stored {
		resp.Revisions[i] = r.GetRevision()
	}
	return resp, nil
}

// UpdateTool implements sharedosv1.CatalogServiceServer.
func (s *CatalogServer) UpdateTool(ctx context.Context, req *sharedosv1.UpdateToolRequest) (*sharedosv1.UpdateToolResponse, error) {
	if req.GetRegistration() == nil {
		return nil, InvalidArgument("registration", "required")
	}
	done, err := s.changing(ctx, "UpdateTool")
	if err != nil {
		return nil, err
	}
	defer done()
	if err := notAcquiredSource("registration.metadata.source", req.GetRegistration().GetMetadata()); err != nil {
		return nil, err
	}
	if err := s.notAcquiredTool(ctx, "UpdateTool", req.GetRegistration().GetName()); err != nil {
		return nil, err
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
	done, err := s.changing(ctx, "DeregisterTool")
	if err != nil {
		return nil, err
	}
	defer done()
	if err := s.notAcquiredTool(ctx, "DeregisterTool", req.GetName()); err != nil {
		return nil, err
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
	done, err := s.changing(ctx, "RegisterPrompt")
	if err != nil {
		return nil, err
	}
	defer done()
	if err := notAcquiredSource("registration.metadata.source", req.GetRegistration().GetMetadata()); err != nil {
		return nil, err
	}
	if err := s.notAcquiredPrompt(ctx, "RegisterPrompt", req.GetRegistration().GetName()); err != nil {
		return nil, err
	}
	if err := s.notProviderNamespace(ctx, "RegisterPrompt", "prompt", req.GetRegistration().GetName()); err != nil {
		return nil, err
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
	done, err := s.changing(ctx, "DeregisterPrompt")
	if err != nil {
		return nil, err
	}
	defer done()
	if err := s.notAcquiredPrompt(ctx, "DeregisterPrompt", req.GetName()); err != nil {
		return nil, err
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
	done, err := s.changing(ctx, "RegisterResource")
	if err != nil {
		return nil, err
	}
	defer done()
	if err := notAcquiredSource("registration.metadata.source", req.GetRegistration().GetMetadata()); err != nil {
		return nil, err
	}
	if err := s.notAcquiredResource(ctx, "RegisterResource", req.GetRegistration().GetUri()); err != nil {
		return nil, err
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
	done, err := s.changing(ctx, "DeregisterResource")
	if err != nil {
		return nil, err
	}
	defer done()
	if err := s.notAcquiredResource(ctx, "DeregisterResource", req.GetUri()); err != nil {
		return nil, err
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

// Entries acquired from an upstream MCP server (metadata.source "mcp:NS")
// are the providers API's (UpstreamService, ADR 0019): it pins them,
// quarantines drift and records every approval. This API neither adds such
// an entry nor changes or removes one, which would publish or withdraw it
// past that record, nor adds a tool or prompt in an upstream's namespace,
// which would share its grants. An entry acquired or a provider added
// between the check and the change cannot be: both run holding the
// providers' lock (changing), which the upstream manager changes under.

// notAcquiredSource refuses a registration that claims an upstream source.
func notAcquiredSource(field string, md *sharedosv1.ToolMetadata) error {
	if src := md.GetSource(); catalog.AcquiredSource(src) {
		return InvalidArgument(field, fmt.Sprintf("%q is the source of entries acquired from an upstream MCP server; "+
			"those are added only through the providers API (sharedosctl providers add)", src))
	}
	return nil
}

// acquiredEntry is the refusal of a change to an acquired entry.
func acquiredEntry(kind, key, source string) error {
	return withDetails(codes.FailedPrecondition,
		fmt.Sprintf("%s %s was acquired from upstream %s; it changes only through the providers API "+
			"(sharedosctl providers refresh or remove, tools approve or reject)", kind, key, source),
		ReasonAcquiredEntry, map[string]string{"source": source})
}

// namespaceOf is name's namespace, as toolname reads it; "" for a name
// without one, or one it refuses (the registration's validation says why).
func namespaceOf(name string) string {
	q, err := toolname.Parse(name)
	if err != nil {
		return ""
	}
	return q.Namespace
}

// notProviderNamespace refuses a new tool or prompt named in the namespace
// an upstream provider holds, however it is spelled: GH.search would take
// the folded key (toolname.FoldedKey) of upstream gh's own search.
func (s *CatalogServer) notProviderNamespace(ctx context.Context, method, kind, name string) error {
	ns := namespaceOf(name)
	if ns == "" || s.providers == nil {
		return nil
	}
	holder, err := s.providers.Holder(ctx, ns)
	if err != nil {
		return s.fail(ctx, method, err)
	}
	if holder == "" {
		return nil
	}
	spelled := ""
	if holder != ns {
		spelled = fmt.Sprintf(" (namespace %s reads as %s: letter case, '-' and '_' read alike, as in tool names)", ns, holder)
	}
	return withDetails(codes.FailedPrecondition,
		fmt.Sprintf("namespace %s is upstream provider %s's%s: a %s named %s there is acquired from it, "+
			"never registered through this API", holder, holder, spelled, kind, name),
		ReasonAcquiredEntry, map[string]string{"source": upstream.Source(holder)})
}

// notAcquiredTool refuses a change to the tool name when it was acquired.
// A tool that is not there passes: the change itself says NotFound.
func (s *CatalogServer) notAcquiredTool(ctx context.Context, method, name string) error {
	reg, _, err := s.svc.Get(ctx, name)
	return s.notAcquired(ctx, method, "tool", name, reg.GetMetadata(), err)
}

func (s *CatalogServer) notAcquiredPrompt(ctx context.Context, method, name string) error {
	var md *sharedosv1.ToolMetadata
	e, err := s.svc.ResolvePrompt(ctx, name)
	if err == nil {
		md = e.Prompt.GetMetadata()
	}
	return s.notAcquired(ctx, method, "prompt", name, md, err)
}

func (s *CatalogServer) notAcquiredResource(ctx context.Context, method, uri string) error {
	var md *sharedosv1.ToolMetadata
	e, err := s.svc.ResolveResource(ctx, uri)
	if err == nil {
		md = e.Resource.GetMetadata()
	}
	return s.notAcquired(ctx, method, "resource", uri, md, err)
}

func (s *CatalogServer) notAcquired(ctx context.Context, method, kind, key string, md *sharedosv1.ToolMetadata, err error) error {
	switch {
	case errors.Is(err, catalog.ErrNotFound):
		return nil
	case err != nil:
		return s.fail(ctx, method, err)
	case catalog.AcquiredSource(md.GetSource()):
		return acquiredEntry(kind, key, md.GetSource())
	}
	return nil
}
