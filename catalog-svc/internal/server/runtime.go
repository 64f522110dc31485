package server

import (
	"context"

	"google.golang.org/grpc"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/platform/tenancy"

	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline"

	"github.com/sharedos/toolshare/catalog-svc/internal/budget"
)

// Runtime is the role RuntimeServer serves: the enforcement pipeline.
type Runtime interface {
	InvokeTool(ctx context.Context, call *sharedosv1.ToolCall) (*sharedosv1.ToolResult, error)
	ListOperations(ctx context.Context, req *sharedosv1.ListOperationsRequest) (*sharedosv1.ListOperationsResponse, error)
	GrantTurn(ctx context.Context, req *sharedosv1.GrantTurnRequest) (*sharedosv1.GrantTurnResponse, error)
	RevokeTurn(ctx context.Context, req *sharedosv1.RevokeTurnRequest) (*sharedosv1.RevokeTurnResponse, error)
	ExportOperations(ctx context.Context, req *sharedosv1.ExportOperationsRequest) (*sharedosv1.ExportOperationsResponse, error)
	RecordExport(ctx context.Context, req *sharedosv1.RecordExportRequest) (*sharedosv1.RecordExportResponse, error)
}

var _ Runtime = (*pipeline.Pipeline)(nil)

// RuntimeServer implements sharedosv1.RuntimeServiceServer over the
// pipeline; it maps the pipeline's errors to gRPC status and scopes a
// host's reads to its tenants.
type RuntimeServer struct {
	sharedosv1.UnimplementedRuntimeServiceServer
	rt      Runtime
	tenants tenancy.Policy
}

var _ sharedosv1.RuntimeServiceServer = (*RuntimeServer)(nil)

// NewRuntimeServer returns the gRPC server over rt. Register it with
// sharedosv1.RegisterRuntimeServiceServer.
func NewRuntimeServer(rt Runtime) *RuntimeServer { return &RuntimeServer{rt: rt} }

// ScopedBy makes ListOperations answer a host only with the records of its
// tenants' turns (p binds host identities to tenants); without it, as for
// a nil p, a host bound to no tenant reads none.
func (s *RuntimeServer) ScopedBy(p tenancy.Policy) *RuntimeServer {
	s.tenants = p
	return s
}

// InvokeTool implements sharedosv1.RuntimeServiceServer.
func (s *RuntimeServer) InvokeTool(ctx context.Context, call *sharedosv1.ToolCall) (*sharedosv1.ToolResult, error) {
	return s.invoke(ctx, call, sharedosv1.CallKind_CALL_KIND_UNSPECIFIED)
}

// GetPrompt implements sharedosv1.RuntimeServiceServer.
func (s *RuntimeServer) GetPrompt(ctx context.Context, call *sharedosv1.ToolCall) (*sharedosv1.ToolResult, error) {
	return s.invoke(ctx, call, sharedosv1.CallKind_CALL_KIND_PROMPT)
}

// ReadResource implements sharedosv1.RuntimeServiceServer.
func (s *RuntimeServer) ReadResource(ctx context.Context, call *sharedosv1.ToolCall) (*sharedosv1.ToolResult, error) {
	return s.invoke(ctx, call, sharedosv1.CallKind_CALL_KIND_RESOURCE)
}

// invoke runs call as the kind its method says, whatever the call claims.
func (s *RuntimeServer) invoke(ctx context.Context, call *sharedosv1.ToolCall, kind sharedosv1.CallKind) (*sharedosv1.ToolResult, error) {
	// The upstream result budget an answer holds goes back as it is
	// returned (gRPC marshals it after; InvokeToolStream holds it until it
	// is sent).
	ctx, end := budget.WithScope(ctx)
	defer end()
	call.Kind = kind
	res, err := s.rt.InvokeTool(ctx, call)
	if err != nil {
		return nil, ToStatus(err)
	}
	return res, nil
}

// ListOperations implements sharedosv1.RuntimeServiceServer. A caller
// bound to some tenants (a host) gets only the records of its tenants: of
// another tenant's turn none, exactly as for a turn that does not exist.
// A record whose grant was refused has no tenant (the turn id is then only
// what its caller said) and is read by those who read every tenant's.
func (s *RuntimeServer) ListOperations(ctx context.Context, req *sharedosv1.ListOperationsRequest) (*sharedosv1.ListOperationsResponse, error) {
	resp, err := s.rt.ListOperations(ctx, req)
	if err != nil {
		return nil, ToStatus(err)
	}
	if s.tenants.AnyTenant(ctx) {
		return resp, nil
	}
	// A turn's rows share their tenant: the caller is checked once per
	// tenant, not once per row.
	reads := map[string]bool{"": false}
	ops := resp.GetOperations()[:0]
	for _, op := range resp.GetOperations() {
		ok, seen := reads[op.GetTenant()]
		if !seen {
			ok = s.tenants.Check(ctx, op.GetTenant()) == nil
			reads[op.GetTenant()] = ok
		}
		if ok {
			ops = append(ops, op)
		}
	}
	resp.Operations = ops
	return resp, nil
}

// GrantTurn implements sharedosv1.RuntimeServiceServer.
func (s *RuntimeServer) GrantTurn(ctx context.Context, req *sharedosv1.GrantTurnRequest) (*sharedosv1.GrantTurnResponse, error) {
	resp, err := s.rt.GrantTurn(ctx, req)
	if err != nil {
		return nil, ToStatus(err)
	}
	return resp, nil
}

// RevokeTurn implements sharedosv1.RuntimeServiceServer.
func (s *RuntimeServer) RevokeTurn(ctx context.Context, req *sharedosv1.RevokeTurnRequest) (*sharedosv1.RevokeTurnResponse, error) {
	resp, err := s.rt.RevokeTurn(ctx, req)
	if err != nil {
		return nil, ToStatus(err)
	}
	return resp, nil
}

// ExportOperations implements sharedosv1.RuntimeServiceServer.
func (s *RuntimeServer) ExportOperations(ctx context.Context, req *sharedosv1.ExportOperationsRequest) (*sharedosv1.ExportOperationsResponse, error) {
	resp, err := s.rt.ExportOperations(ctx, req)
	if err != nil {
		return nil, ToStatus(err)
	}
	return resp, nil
}

// RecordExport implements sharedosv1.RuntimeServiceServer.
func (s *RuntimeServer) RecordExport(ctx context.Context, req *sharedosv1.RecordExportRequest) (*sharedosv1.RecordExportResponse, error) {
	resp, err := s.rt.RecordExport(ctx, req)
	if err != nil {
		return nil, ToStatus(err)
	}
	return resp, nil
}

// InvokeToolStream implements sharedosv1.RuntimeServiceServer: InvokeTool
// with the handler's progress sent ahead of the one result.
func (s *RuntimeServer) InvokeToolStream(call *sharedosv1.ToolCall, stream grpc.ServerStreamingServer[sharedosv1.ToolEvent]) error {
	ctx := pipeline.WithProgress(stream.Context(), func(p *sharedosv1.Progress) {
		// A failed send means the bridge is gone; the call's context ends
		// with the stream, and the result is not sent either.
		_ = stream.Send(&sharedosv1.ToolEvent{Event: &sharedosv1.ToolEvent_Progress{Progress: p}})
	})
	call.Kind = sharedosv1.CallKind_CALL_KIND_UNSPECIFIED
	// The upstream result budget the answer holds goes back once it is
	// sent (budget.Scope), whatever became of the call.
	ctx, end := budget.WithScope(ctx)
	defer end()
	res, err := s.rt.InvokeTool(ctx, call)
	if err != nil {
		return ToStatus(err)
	}
	return stream.Send(&sharedosv1.ToolEvent{Event: &sharedosv1.ToolEvent_Result{Result: res}})
}
