package bridgetest

import (
	"context"
	"encoding/json"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/cataloghash"
	"github.com/sharedos/toolshare/services/contract/outcome"
	"github.com/sharedos/toolshare/services/contract/projection"
)

// Tool publishes a tool through the kernel's projection, so canonical_json
// and the catalogue's hash are the real ones. It panics on a tool the
// projection refuses (a test bug).
func Tool(name, desc, input, output, annotations string) *sharedosv1.PublishedTool {
	ns, _, _ := strings.Cut(name, ".")
	if ns == name {
		ns = ""
	}
	source := "provider:" + ns
	if ns == "" {
		source = "provider:conformance"
	}
	t, err := projection.Publish(projection.Tool{
		Name: name, Description: desc, InputSchema: json.RawMessage(input),
		OutputSchema: json.RawMessage(output), Annotations: json.RawMessage(annotations),
		Namespace: ns, Source: source,
	})
	if err != nil {
		panic(err)
	}
	return t
}

// DefaultTools is the catalogue the fake catalog publishes unless told otherwise.
func DefaultTools() []*sharedosv1.PublishedTool {
	return []*sharedosv1.PublishedTool{
		Tool("files.read", "Read a file.",
			`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false}`,
			"", `{"readOnlyHint":true}`),
		Tool("notes.append", "Append a note.",
			`{"type":"object","properties":{"text":{"type":"string"},"wait_for_previous":{"type":"boolean"}}}`,
			"", `{"destructiveHint":false}`),
		Tool("slow.wait", "Waits until cancelled.", `{"type":"object"}`, "", ""),
	}
}

// FakeCatalog serves CatalogService.ListTools from a fixed catalogue.
type FakeCatalog struct {
	sharedosv1.UnimplementedCatalogServiceServer
	mu    sync.Mutex
	tools []*sharedosv1.PublishedTool
	hash  string
	err   error
}

// SetTools replaces the catalogue (sorted by name, as catalog-svc answers).
func (c *FakeCatalog) SetTools(tools []*sharedosv1.PublishedTool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	tools = slices.Clone(tools)
	slices.SortFunc(tools, func(a, b *sharedosv1.PublishedTool) int { return strings.Compare(a.GetName(), b.GetName()) })
	c.tools = tools
	entries := make([]cataloghash.Entry, len(tools))
	for i, t := range tools {
		entries[i] = cataloghash.Entry{Name: t.GetName(), Canonical: t.GetCanonicalJson()}
	}
	c.hash = cataloghash.Sum(entries)
}

// SetError makes ListTools fail with err (nil restores it).
func (c *FakeCatalog) SetError(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.err = err
}

// Hash is the catalogue's hash.
func (c *FakeCatalog) Hash() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hash
}

// ListTools implements sharedosv1.CatalogServiceServer.
func (c *FakeCatalog) ListTools(context.Context, *sharedosv1.ListToolsRequest) (*sharedosv1.ListToolsResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return nil, c.err
	}
	out := &sharedosv1.ListToolsResponse{CatalogHash: c.hash}
	for _, t := range c.tools {
		out.Tools = append(out.Tools, proto.Clone(t).(*sharedosv1.PublishedTool))
	}
	return out, nil
}

// Dispatch answers a ToolCall the fake kernel does not know itself; the
// conformance e2e plugs the conformance provider in here.
type Dispatch func(ctx context.Context, call *sharedosv1.ToolCall) (*sharedosv1.ToolResult, bool)

// FakeKernel is a RuntimeService that records every call and answers:
// files.read of /public/... succeeds, any other path is denied
// (permission_denied); slow.wait blocks until cancelled or released; notes.append
// succeeds echoing its arguments; a name outside the turn's pin is denied
// tool_unavailable, and a call without a grant it issued (or of a revoked
// turn) invalid_grant. GrantTurn pins the FakeCatalog ServeFakes gives it;
// its grants are opaque ids, not signatures.
type FakeKernel struct {
	sharedosv1.UnimplementedRuntimeServiceServer
	Dispatch Dispatch

	mu      sync.Mutex
	catalog *FakeCatalog
	grants  map[string]*FakeGrant
	revoked []string
	calls   []*sharedosv1.ToolCall
	// streamed counts InvokeToolStream calls.
	streamed int
	// Started receives the call id of each slow.wait when it starts;
	// Cancelled when its context ends.
	Started   chan string
	Cancelled chan string
	// Release ends one running slow.wait with a success result.
	Release chan struct{}
	// Progress are the reports InvokeToolStream sends before each result.
	Progress []float64
}

// NewFakeKernel returns a FakeKernel.
func NewFakeKernel() *FakeKernel {
	return &FakeKernel{Started: make(chan string, 16), Cancelled: make(chan string, 16), Release: make(chan struct{})}
}

// FakeGrant is what a fake grant stands for.
type FakeGrant struct {
	TurnID  string
	Context *sharedosv1.AccessContext
	Tools   map[string]bool
}

// GrantTurn implements sharedosv1.RuntimeServiceServer.
func (k *FakeKernel) GrantTurn(ctx context.Context, req *sharedosv1.GrantTurnRequest) (*sharedosv1.GrantTurnResponse, error) {
	if req.GetTurnId() == "" || req.GetContext().GetPrincipal() == "" || req.GetExpiresAt() == nil {
		return nil, status.Error(codes.InvalidArgument, "turn_id, context.principal and expires_at are required")
	}
	k.mu.Lock()
	cat := k.catalog
	k.mu.Unlock()
	if cat == nil {
		return nil, status.Error(codes.FailedPrecondition, "fake kernel has no catalogue")
	}
	listing, err := cat.ListTools(ctx, &sharedosv1.ListToolsRequest{Context: req.GetContext()})
	if err != nil {
		return nil, err
	}
	g := &FakeGrant{TurnID: req.GetTurnId(), Context: proto.Clone(req.GetContext()).(*sharedosv1.AccessContext), Tools: map[string]bool{}}
	for _, t := range listing.GetTools() {
		g.Tools[t.GetName()] = true
	}
	id := "fake-grant:" + req.GetTurnId()
	k.mu.Lock()
	if k.grants == nil {
		k.grants = map[string]*FakeGrant{}
	}
	k.grants[id] = g
	k.mu.Unlock()
	return &sharedosv1.GrantTurnResponse{Grant: id, CatalogHash: listing.GetCatalogHash(), Tools: listing.GetTools()}, nil
}

// RevokeTurn implements sharedosv1.RuntimeServiceServer.
func (k *FakeKernel) RevokeTurn(_ context.Context, req *sharedosv1.RevokeTurnRequest) (*sharedosv1.RevokeTurnResponse, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.grants, "fake-grant:"+req.GetTurnId())
	k.revoked = append(k.revoked, req.GetTurnId())
	return &sharedosv1.RevokeTurnResponse{}, nil
}

// Grant returns what a grant the fake issued stands for (nil if none).
func (k *FakeKernel) Grant(grant string) *FakeGrant {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.grants[grant]
}

// Revoked returns the turns revoked so far, in order.
func (k *FakeKernel) Revoked() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.revoked)
}

// Calls returns a copy of every ToolCall received so far.
func (k *FakeKernel) Calls() []*sharedosv1.ToolCall {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make([]*sharedosv1.ToolCall, len(k.calls))
	for i, c := range k.calls {
		out[i] = proto.Clone(c).(*sharedosv1.ToolCall)
	}
	return out
}

// InvokeTool implements sharedosv1.RuntimeServiceServer.
func (k *FakeKernel) InvokeTool(ctx context.Context, call *sharedosv1.ToolCall) (*sharedosv1.ToolResult, error) {
	k.mu.Lock()
	k.calls = append(k.calls, proto.Clone(call).(*sharedosv1.ToolCall))
	k.mu.Unlock()
	if call.GetCallId() == "" || call.GetTurnId() == "" {
		return nil, status.Error(codes.InvalidArgument, "call_id and turn_id are required")
	}
	if call.GetAbandoned() {
		// The bridge gave up on the call on its way: the real kernel records
		// it (unless it arrived) and runs nothing, as what the bridge
		// answered its client (its code), else cancelled.
		if code := call.GetAbandonedCode(); code != "" {
			return withID(outcome.Failed(code, "abandoned"), call), nil
		}
		return withID(outcome.CancelledResult("abandoned"), call), nil
	}
	k.mu.Lock()
	grant := k.grants[call.GetGrant()]
	k.mu.Unlock()
	if grant == nil || grant.TurnID != call.GetTurnId() {
		return withID(outcome.Denied(outcome.InvalidGrant, "the call carries no valid grant of this turn"), call), nil
	}
	if !grant.Tools[call.GetTool()] {
		return withID(outcome.Denied(outcome.ToolUnavailable, "tool "+quote(call.GetTool())+" is not in this turn's catalogue"), call), nil
	}
	if k.Dispatch != nil {
		if res, ok := k.Dispatch(ctx, call); ok {
			return withID(res, call), nil
		}
	}
	switch call.GetTool() {
	case "files.read":
		var args struct {
			Path string `json:"path"`
		}
		if err := json.Unmarshal(call.GetArgumentsJson(), &args); err != nil || args.Path == "" {
			return withID(outcome.Failed(outcome.InvalidArguments, "path: required string"), call), nil
		}
		if !strings.HasPrefix(args.Path, "/public/") {
			r := outcome.Denied(outcome.PermissionDenied, grant.Context.GetPrincipal()+" may not read "+args.Path)
			r.DecisionId = "d-" + call.GetCallId()
			return withID(r, call), nil
		}
		return withID(&sharedosv1.ToolResult{
			Status:      sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED,
			ContentJson: mustJSON([]map[string]any{{"type": "text", "text": "contents of " + args.Path}}),
			DecisionId:  "d-" + call.GetCallId(),
		}, call), nil
	case "notes.append":
		return withID(&sharedosv1.ToolResult{
			Status:                sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED,
			ContentJson:           mustJSON([]map[string]any{{"type": "text", "text": "appended"}}),
			StructuredContentJson: call.GetArgumentsJson(),
		}, call), nil
	case "slow.wait":
		k.Started <- call.GetCallId()
		select {
		case <-k.Release:
			return withID(&sharedosv1.ToolResult{
				Status:      sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED,
				ContentJson: mustJSON([]map[string]any{{"type": "text", "text": "released"}}),
			}, call), nil
		case <-ctx.Done():
			k.Cancelled <- call.GetCallId()
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
	return withID(outcome.Failed(outcome.Internal, "fake kernel has no handler for "+call.GetTool()), call), nil
}

// InvokeToolStream implements sharedosv1.RuntimeServiceServer: Progress,
// then InvokeTool's answer.
func (k *FakeKernel) InvokeToolStream(call *sharedosv1.ToolCall, stream grpc.ServerStreamingServer[sharedosv1.ToolEvent]) error {
	k.mu.Lock()
	k.streamed++
	k.mu.Unlock()
	for _, p := range k.Progress {
		if err := stream.Send(&sharedosv1.ToolEvent{Event: &sharedosv1.ToolEvent_Progress{Progress: &sharedosv1.Progress{Progress: p, Total: 100, Message: "working"}}}); err != nil {
			return err
		}
	}
	res, err := k.InvokeTool(stream.Context(), call)
	if err != nil {
		return err
	}
	return stream.Send(&sharedosv1.ToolEvent{Event: &sharedosv1.ToolEvent_Result{Result: res}})
}

// Streamed is how many calls came as InvokeToolStream.
func (k *FakeKernel) Streamed() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.streamed
}

func withID(r *sharedosv1.ToolResult, call *sharedosv1.ToolCall) *sharedosv1.ToolResult {
	r.CallId = call.GetCallId()
	return r
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// ServeFakes serves catalog and kernel on one loopback gRPC port and returns
// its address; the server stops at test cleanup.
func ServeFakes(t testing.TB, catalog *FakeCatalog, kernel *FakeKernel) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	kernel.mu.Lock()
	kernel.catalog = catalog
	kernel.mu.Unlock()
	s := grpc.NewServer()
	sharedosv1.RegisterCatalogServiceServer(s, catalog)
	sharedosv1.RegisterRuntimeServiceServer(s, kernel)
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Serve(lis) }()
	t.Cleanup(func() { s.Stop(); <-done })
	return lis.Addr().String()
}
