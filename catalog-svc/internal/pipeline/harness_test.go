package pipeline_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/outcome"
	"github.com/sharedos/toolshare/services/platform/grpcx"
	"github.com/sharedos/toolshare/services/platform/pgdb/pgtest"
	"github.com/sharedos/toolshare/services/providers/files"

	"github.com/sharedos/toolshare/catalog-svc/internal/catalog"
	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline"
	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline/grants"
	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline/records"
	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline/records/journal"
	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline/records/memory"
	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline/records/postgres"
	"github.com/sharedos/toolshare/catalog-svc/internal/server"
	"github.com/sharedos/toolshare/catalog-svc/migrations"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// ---- catalogue ----

const (
	pathSchema   = `{"type":"object","properties":{"path":{"type":"string","minLength":1,"maxLength":4096}},"required":["path"],"additionalProperties":false}`
	searchSchema = `{"type":"object","properties":{"query":{"type":"string","minLength":1},"path":{"type":"string"},"limit":{"type":"integer","minimum":1,"maximum":100}},"required":["query","path"],"additionalProperties":false}`
	writeSchema  = `{"type":"object","properties":{"path":{"type":"string","minLength":1},"content":{"type":"string","maxLength":1048576}},"required":["path","content"],"additionalProperties":false}`
	sleepSchema  = `{"type":"object"}`
)

// fakeResolver stands in for catalog.Service: the runtime only needs its
// Resolve. The real catalogue is wired in the app's integration tests.
type fakeResolver struct {
	mu    sync.Mutex
	tools map[string]*catalog.Resolved
}

func (f *fakeResolver) Resolve(_ context.Context, name string) (*catalog.Resolved, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.tools[name]
	if !ok {
		return nil, catalog.ErrNotFound
	}
	return r, nil
}

func (f *fakeResolver) add(t testing.TB, name, schema, action, resource, target string, class sharedosv1.ToolClass, timeout time.Duration) {
	t.Helper()
	c := jsonschema.NewCompiler()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddResource("mem://"+name, doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("mem://" + name)
	if err != nil {
		t.Fatal(err)
	}
	reg := &sharedosv1.ToolRegistration{
		Name: name, Description: name, InputSchemaJson: []byte(schema),
		AnnotationsJson: []byte(`{"readOnlyHint":true}`),
		Metadata:        &sharedosv1.ToolMetadata{Namespace: strings.SplitN(name, ".", 2)[0], Source: "test"},
		Class:           class,
		Requirement:     &sharedosv1.Requirement{Action: action, Resource: resource},
		Handler:         &sharedosv1.HandlerRef{Target: target},
	}
	if timeout > 0 {
		reg.Handler.Timeout = durationpb.New(timeout)
	}
	canon := []byte(`{"name":"` + name + `","inputSchema":` + schema + `}`)
	sum := sha256.Sum256(canon)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tools[name] = &catalog.Resolved{
		Registration: reg,
		Published:    &sharedosv1.PublishedTool{Name: name, InputSchemaJson: []byte(schema), CanonicalJson: canon},
		Digest:       hex.EncodeToString(sum[:]),
		InputSchema:  sch,
		ReadOnly:     true, // as the annotations say
	}
}

// pin is every tool's name → digest, as a grant of the whole catalogue.
func (f *fakeResolver) pin() map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := map[string]string{}
	for name, r := range f.tools {
		p[name] = r.Digest
	}
	return p
}

// ---- grants ----

// testKeys signs every test kernel's grants.
var testKeys = func() *grants.Keys {
	k, err := grants.Generate()
	if err != nil {
		panic(err)
	}
	return k
}()

var testHash = strings.Repeat("ab", 32)

// alice is the context the harness's grants carry.
func alice() *sharedosv1.AccessContext {
	return &sharedosv1.AccessContext{Principal: "alice", Tenant: "acme", Roles: []string{"engineer"}}
}

// grantFor is a grant of turn for alice over pin, valid for an hour.
func grantFor(t testing.TB, turn string, pin map[string]string) string {
	t.Helper()
	g, err := testKeys.Issue(grants.Grant{TurnID: turn, Context: alice(), CatalogHash: testHash, Tools: pin,
		ExpiresAt: time.Now().Add(time.Hour)}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// ---- authz ----

// fakeAuthz mimics the example policy on loopback gRPC: read and search are
// allowed under /public, write under /public/, everything else is denied
// with a reason. mode switches it into the failure behaviours.
type fakeAuthz struct {
	sharedosv1.UnimplementedAuthzServiceServer
	mode    atomic.Value // string: "", "hang", "error", "eval timeout", "undecided", "refused"
	calls   atomic.Int64
	hanging chan struct{} // receives once per call in "hang" mode
	mu      sync.Mutex
	last    *sharedosv1.AuthorizeRequest
	seen    []string // resources, in order
}

// FilterTools shows every tool: the tests of visibility are authz-svc's.
func (a *fakeAuthz) FilterTools(_ context.Context, req *sharedosv1.FilterToolsRequest) (*sharedosv1.FilterToolsResponse, error) {
	resp := &sharedosv1.FilterToolsResponse{}
	for _, t := range req.GetTools() {
		resp.AllowedTools = append(resp.AllowedTools, t.GetName())
	}
	return resp, nil
}

func (a *fakeAuthz) Authorize(ctx context.Context, req *sharedosv1.AuthorizeRequest) (*sharedosv1.AuthorizeResponse, error) {
	a.calls.Add(1)
	a.mu.Lock()
	a.last = req
	a.seen = append(a.seen, req.GetResource())
	a.mu.Unlock()
	switch a.mode.Load() {
	case "hang":
		select {
		case a.hanging <- struct{}{}:
		default:
		}
		<-ctx.Done()
		return nil, status.FromContextError(ctx.Err()).Err()
	case "error":
		return nil, status.Error(codes.Internal, "eval_type_error: operand must be string")
	case "eval timeout": // as authz-svc answers an evaluation past --eval-timeout
		return nil, grpcx.Error(codes.DeadlineExceeded, "policy evaluation timed out; no decision was made",
			outcome.ErrorDomainAuthz, outcome.ReasonAuthzEvalError, map[string]string{"decision_id": "dec-t"})
	case "undecided":
		return &sharedosv1.AuthorizeResponse{DecisionId: "dec-u", PolicyRevision: "rev-1"}, nil
	case "refused": // as authz-svc refuses a request before evaluating it
		return nil, grpcx.Error(codes.InvalidArgument, "arguments_json: must hold at most 65536 JSON values",
			outcome.ErrorDomainAuthz, "AUTHZ_INVALID_ARGUMENT", map[string]string{"field": "arguments_json"},
			grpcx.FieldViolation("arguments_json", "must hold at most 65536 JSON values"))
	}
	res := req.GetResource()
	allowed := strings.HasPrefix(res, "file:/public/") || (res == "file:/public" && req.GetAction() != "write") ||
		((strings.HasPrefix(res, "prompt:") || strings.HasPrefix(res, "resource:")) && !strings.Contains(res, "secret"))
	if allowed {
		return &sharedosv1.AuthorizeResponse{Decision: sharedosv1.Decision_DECISION_ALLOW, DecisionId: "dec-allow", PolicyRevision: "rev-1"}, nil
	}
	return &sharedosv1.AuthorizeResponse{Decision: sharedosv1.Decision_DECISION_DENY,
		Reason:     "principal " + req.GetContext().GetPrincipal() + " may not " + req.GetAction() + " " + strings.TrimPrefix(res, "file:"),
		DecisionId: "dec-deny", PolicyRevision: "rev-1"}, nil
}

func (a *fakeAuthz) resources() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.seen...)
}

// ---- handler ----

// countingHandler is the real files provider behind a counter; the tool
// "test.sleep" instead blocks until its context ends and reports how.
type countingHandler struct {
	sharedosv1.UnimplementedToolHandlerServiceServer
	files    *files.Provider
	calls    atomic.Int64
	mu       sync.Mutex
	lastArgs []byte
	started  chan struct{}
	ended    chan error
	answer   *sharedosv1.HandleResponse // overrides the answer when set
	contents []byte                     // overrides a read's contents when set
	messages []byte                     // overrides a prompt's messages when set
	// progress, when set, makes Invoke (contract v2) report these values
	// before its result; unset, Invoke is UNIMPLEMENTED (a v1 provider).
	progress []float64
	invokes  atomic.Int64
	// ask, when set, may answer a request first (contract v3 rounds);
	// nil from it lets the request through.
	ask func(*sharedosv1.HandleRequest) *sharedosv1.HandleResponse
	// asked holds the requests ask saw.
	asked []*sharedosv1.HandleRequest
}

// asks makes f the handler's ask (contract v3 rounds).
func (h *countingHandler) asks(f func(*sharedosv1.HandleRequest) *sharedosv1.HandleResponse) {
	h.mu.Lock()
	h.ask = f
	h.mu.Unlock()
}

func (h *countingHandler) Invoke(req *sharedosv1.HandleRequest, stream grpc.ServerStreamingServer[sharedosv1.HandleEvent]) error {
	h.mu.Lock()
	progress := h.progress
	h.mu.Unlock()
	if progress == nil {
		return status.Error(codes.Unimplemented, "a v1 provider")
	}
	h.invokes.Add(1)
	for _, v := range progress {
		ev := &sharedosv1.HandleEvent{Event: &sharedosv1.HandleEvent_Progress{Progress: &sharedosv1.Progress{Progress: v, Total: 100, Message: "step"}}}
		if err := stream.Send(ev); err != nil {
			return err
		}
	}
	resp, err := h.Handle(stream.Context(), req)
	if err != nil {
		return err
	}
	return stream.Send(&sharedosv1.HandleEvent{Event: &sharedosv1.HandleEvent_Result{Result: resp}})
}

// GetPrompt (contract v4): review asks for a name first (a v3 round).
func (h *countingHandler) GetPrompt(_ context.Context, req *sharedosv1.HandleRequest) (*sharedosv1.PromptResponse, error) {
	h.calls.Add(1)
	h.mu.Lock()
	h.asked = append(h.asked, req)
	h.mu.Unlock()
	if req.GetTool() == "review" && len(req.GetInputResponsesJson()) == 0 {
		return &sharedosv1.PromptResponse{InputRequired: &sharedosv1.InputRequired{
			InputRequestsJson: []byte(`{"who":{"method":"elicitation/create","params":{"message":"Who?"}}}`)}}, nil
	}
	h.mu.Lock()
	messages := h.messages
	h.mu.Unlock()
	if messages != nil {
		return &sharedosv1.PromptResponse{Description: "a prompt", MessagesJson: messages}, nil
	}
	b, _ := json.Marshal([]map[string]any{{"role": "user", "content": map[string]string{"type": "text",
		"text": "prompt " + req.GetTool() + " " + string(req.GetArgumentsJson())}}})
	return &sharedosv1.PromptResponse{Description: "a prompt", MessagesJson: b}, nil
}

// ReadResource (contract v4): id 404 of the template does not exist.
func (h *countingHandler) ReadResource(_ context.Context, req *sharedosv1.HandleRequest) (*sharedosv1.ResourceResponse, error) {
	h.calls.Add(1)
	h.mu.Lock()
	h.asked = append(h.asked, req)
	h.mu.Unlock()
	if strings.Contains(req.GetTool(), "/404/") {
		return nil, status.Error(codes.NotFound, "no such item")
	}
	h.mu.Lock()
	contents := h.contents
	h.mu.Unlock()
	if contents != nil {
		return &sharedosv1.ResourceResponse{ContentsJson: contents}, nil
	}
	b, _ := json.Marshal([]map[string]string{{"uri": req.GetTool(), "mimeType": "text/plain", "text": "read " + req.GetRegistered()}})
	return &sharedosv1.ResourceResponse{ContentsJson: b}, nil
}

func (h *countingHandler) Handle(ctx context.Context, req *sharedosv1.HandleRequest) (*sharedosv1.HandleResponse, error) {
	h.calls.Add(1)
	h.mu.Lock()
	h.lastArgs = append([]byte(nil), req.GetArgumentsJson()...)
	answer, ask := h.answer, h.ask
	if ask != nil {
		h.asked = append(h.asked, req)
	}
	h.mu.Unlock()
	if answer != nil {
		return answer, nil
	}
	if ask != nil {
		if resp := ask(req); resp != nil {
			return resp, nil
		}
	}
	if req.GetTool() == "test.sleep" || req.GetTool() == "test.quick_timeout" {
		h.started <- struct{}{}
		<-ctx.Done()
		h.ended <- ctx.Err()
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	return h.files.Handle(ctx, req)
}

// ---- fixture tree ----

func fixtureRoot(t testing.TB) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "root")
	for _, d := range []string{"public", "private", "publicity"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, content := range map[string]string{
		"public/a.txt":       "Hello from /public/a.txt\n",
		"private/a.txt":      "PRIVATE-A\n",
		"private/secret.txt": "PRIVATE-SECRET\n",
		"publicity/a.txt":    "PRIVATE-PUBLICITY\n",
	} {
		if err := os.WriteFile(filepath.Join(root, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("../private/a.txt", filepath.Join(root, "public/link-to-private")); err != nil {
		t.Fatal(err)
	}
	return root
}

// ---- loopback servers ----

func serveGRPC(t testing.TB, register func(*grpcx.Server)) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpcx.NewServer(grpcx.ServerOptions{ServiceName: "test", Logger: quiet})
	register(srv)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, lis) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return lis.Addr().String()
}

// deadAddr is a loopback address nothing listens on.
func deadAddr(t testing.TB) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	return addr
}

// ---- harness ----

type backend struct {
	name string
	open func(t *testing.T) (records.Store, func() int)
}

var backends = []backend{
	{"memory", func(t *testing.T) (records.Store, func() int) {
		s := memory.New()
		return s, s.Len
	}},
	{"postgres", func(t *testing.T) (records.Store, func() int) {
		pool := pgtest.Pool(t, pgtest.NewDatabase(t, migrations.Up))
		return postgres.New(pool), func() int {
			var n int
			if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM catalog.operations`).Scan(&n); err != nil {
				t.Errorf("count rows: %v", err)
			}
			return n
		}
	}},
}

type harness struct {
	t        *testing.T
	kernel   *pipeline.Pipeline
	rpc      *server.RuntimeServer // kernel as served over gRPC (errors mapped)
	store    records.Store
	rows     func() int
	resolver *fakeResolver
	authz    *fakeAuthz
	handler  *countingHandler
	root     string

	authzClient  sharedosv1.AuthzServiceClient
	authzTimeout time.Duration
	inputWait    time.Duration // 0: the default

	mu       sync.Mutex
	attempts map[string]int   // turn → InvokeTool calls answered with a result
	journal  *journal.Journal // nil: memory only
	seq      int
}

type options struct {
	authzAddr    string // "" = the fake authz
	authzTimeout time.Duration
	wrapStore    func(records.Store) records.Store
	journaled    bool // a durable record journal (a directory of the test's)
	inputWait    time.Duration
}

// forEachStore runs fn against every operation-record backend.
func forEachStore(t *testing.T, opts options, fn func(t *testing.T, h *harness)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			store, rows := b.open(t)
			fn(t, newHarness(t, store, rows, opts))
		})
	}
}

func newHarness(t *testing.T, store records.Store, rows func() int, opts options) *harness {
	t.Helper()
	h := &harness{t: t, rows: rows, resolver: &fakeResolver{tools: map[string]*catalog.Resolved{}},
		authz: &fakeAuthz{hanging: make(chan struct{}, 1)}, attempts: map[string]int{}, root: fixtureRoot(t)}
	h.store = store
	if opts.wrapStore != nil {
		h.store = opts.wrapStore(store)
	}
	fp, err := files.New(h.root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fp.Close() })
	h.handler = &countingHandler{files: fp, started: make(chan struct{}, 1), ended: make(chan error, 1)}
	handlerAddr := serveGRPC(t, func(s *grpcx.Server) { sharedosv1.RegisterToolHandlerServiceServer(s.GRPC(), h.handler) })
	authzAddr := opts.authzAddr
	if authzAddr == "" {
		authzAddr = serveGRPC(t, func(s *grpcx.Server) { sharedosv1.RegisterAuthzServiceServer(s.GRPC(), h.authz) })
	}
	cc, err := grpcx.Dial(authzAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })

	managed := sharedosv1.ToolClass_TOOL_CLASS_MANAGED
	h.resolver.add(t, "files.read", pathSchema, "read", "file:{path}", handlerAddr, managed, 0)
	h.resolver.add(t, "files.search", searchSchema, "search", "file:{path}", handlerAddr, managed, 0)
	h.resolver.add(t, "files.write", writeSchema, "write", "file:{path}", handlerAddr, managed, 0)
	h.resolver.add(t, "test.sleep", sleepSchema, "read", "file:/public/sleep", handlerAddr, managed, 0)
	h.resolver.add(t, "test.quick_timeout", sleepSchema, "read", "file:/public/sleep", handlerAddr, managed, quickTimeout)
	h.resolver.add(t, "test.local", pathSchema, "read", "file:{path}", handlerAddr, sharedosv1.ToolClass_TOOL_CLASS_HARNESS_LOCAL, 0)
	h.resolver.add(t, "test.unreachable", pathSchema, "read", "file:{path}", deadAddr(t), managed, 0)

	h.authzClient = sharedosv1.NewAuthzServiceClient(cc)
	h.authzTimeout, h.inputWait = opts.authzTimeout, opts.inputWait
	if opts.journaled {
		if h.journal, err = journal.Open(t.TempDir(), quiet); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = h.journal.Close() })
	}
	h.kernel = newKernelWith(t, h, h.resolver)
	h.rpc = server.NewRuntimeServer(h.kernel)
	t.Cleanup(h.checkNothingLost)
	return h
}

// quickTimeout is test.quick_timeout's handler timeout: the call must reach
// the handler within it on a loaded machine before the timeout ends it.
const quickTimeout = 2 * time.Second

// newKernelWith builds a kernel over h's store and authz with resolver.
func newKernelWith(t *testing.T, h *harness, resolver pipeline.ToolResolver) *pipeline.Pipeline {
	t.Helper()
	lister, _ := resolver.(pipeline.CatalogueLister)
	entries, _ := resolver.(pipeline.EntryResolver)
	k, err := pipeline.New(pipeline.Config{
		Resolver: resolver, Entries: entries, Catalogue: lister, Records: h.store, Authz: h.authzClient, Grants: testKeys,
		AuthzTimeout: h.authzTimeout, InstanceID: "test-kernel", Logger: quiet, Journal: h.journal, InputWait: h.inputWait,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	return k
}

// checkNothingLost is the audit invariant every test ends with: one row per
// attempt, none pending, and no row without an attempt.
func (h *harness) checkNothingLost() {
	t := h.t
	h.mu.Lock()
	defer h.mu.Unlock()
	total := 0
	for turn, n := range h.attempts {
		total += n
		rows, err := h.store.ListOperations(context.Background(), turn)
		if err != nil {
			t.Errorf("list %s: %v", turn, err)
			continue
		}
		if len(rows) != n {
			t.Errorf("turn %s: %d rows for %d attempts", turn, len(rows), n)
		}
		for _, r := range rows {
			if r.Status == sharedosv1.OperationStatus_OPERATION_STATUS_PENDING {
				t.Errorf("turn %s: row %s still pending", turn, r.CallID)
			}
		}
	}
	if got := h.rows(); got != total {
		t.Errorf("store holds %d rows for %d attempts", got, total)
	}
}

func (h *harness) newCall(turn, tool, args string) *sharedosv1.ToolCall {
	h.mu.Lock()
	h.seq++
	id := h.seq
	h.mu.Unlock()
	return &sharedosv1.ToolCall{
		CallId: "call-" + itoa(id), TurnId: turn, Tool: tool, ArgumentsJson: []byte(args),
		Grant: grantFor(h.t, turn, h.resolver.pin()), Harness: "test",
	}
}

func itoa(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return itoa(i/10) + digits[i%10:i%10+1]
}

// invoke runs one attempt and counts it when it was answered with a result.
func (h *harness) invoke(ctx context.Context, call *sharedosv1.ToolCall) (*sharedosv1.ToolResult, error) {
	res, err := h.rpc.InvokeTool(ctx, call)
	if err == nil {
		h.mu.Lock()
		h.attempts[call.GetTurnId()]++
		h.mu.Unlock()
	}
	return res, err
}

func (h *harness) call(turn, tool, args string) *sharedosv1.ToolResult {
	h.t.Helper()
	res, err := h.invoke(context.Background(), h.newCall(turn, tool, args))
	if err != nil {
		h.t.Fatalf("InvokeTool(%q, %s): %v", tool, args, err)
	}
	return res
}

func (h *harness) records(turn string) []records.Record {
	h.t.Helper()
	rows, err := h.store.ListOperations(context.Background(), turn)
	if err != nil {
		h.t.Fatal(err)
	}
	return rows
}

// wait receives from ch; the bound only turns a hang into a failure.
func wait[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("%s never happened", what)
		panic("unreachable")
	}
}

func expect(t *testing.T, res *sharedosv1.ToolResult, st sharedosv1.OperationStatus, code string) {
	t.Helper()
	if res.GetStatus() != st || res.GetCode() != code {
		t.Fatalf("result = %v/%q (%s), want %v/%q", res.GetStatus(), res.GetCode(), res.GetReason(), st, code)
	}
}

func text(res *sharedosv1.ToolResult) string { return string(res.GetContentJson()) }

var errInjected = errors.New("injected store failure")

// quiet drops logs: the tests assert on results and records, not log lines.
var quiet = slog.New(slog.DiscardHandler)
