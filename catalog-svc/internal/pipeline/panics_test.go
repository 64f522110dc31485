package pipeline_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"google.golang.org/grpc"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/inputround"
	"github.com/sharedos/toolshare/services/contract/outcome"
	"github.com/sharedos/toolshare/services/platform/grpcx"

	"github.com/sharedos/toolshare/catalog-svc/internal/catalog"
	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline"
	"github.com/sharedos/toolshare/catalog-svc/internal/server"
)

// The reasons of an attempt ended by a panic in the kernel: before
// anything was dispatched, and once the tool may have run.
const (
	notRun     = "the SharedOS kernel failed while handling the call; the call was not run"
	mayHaveRun = "the SharedOS kernel failed while handling the call; the tool may have run"
)

// panickingResolver is the harness's catalogue, which panics while set:
// a kernel bug in step 2, after the attempt's pending row is written.
type panickingResolver struct {
	*fakeResolver
	panics atomic.Bool
}

func (r *panickingResolver) Resolve(ctx context.Context, name string) (*catalog.Resolved, error) {
	if r.panics.Load() {
		panic("resolver bug")
	}
	return r.fakeResolver.Resolve(ctx, name)
}

// TestAPanicAfterTheRecordEndsTheAttempt (reliability row 47): the kernel,
// served as in catalog-svc (grpcx's interceptor recovers a panic and the
// process lives on), panics while running an attempt whose pending row is
// written — a tools/call, the same over InvokeToolStream, and an input
// round's retry. Each attempt still ends with its one record,
// failed/internal, and the client is answered with exactly that result —
// that the call was not run, the panic being in step 2, before anything
// was dispatched, and for the retry that the tool may have run (its first
// round did; attack run F2: a schema validator's panic was answered "the
// tool may have run", which it never had);
// the call leaves the turn's calls in flight, so RevokeTurn finds none to
// cancel and nothing pending. Before, the client got a gRPC Internal, the
// row stayed pending until the age-based reconcile (15 min 32 s), and
// RevokeTurn (CloseTurn) of the turn failed Unavailable until then.
func TestAPanicAfterTheRecordEndsTheAttempt(t *testing.T) {
	forEachStore(t, options{}, func(t *testing.T, h *harness) {
		ctx := context.Background()
		resolver := &panickingResolver{fakeResolver: h.resolver}
		kernel := newKernelWith(t, h, resolver)
		addr := serveGRPC(t, func(s *grpcx.Server) {
			sharedosv1.RegisterRuntimeServiceServer(s.GRPC(), server.NewRuntimeServer(kernel))
		})
		cc, err := grpcx.Dial(addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		client := sharedosv1.NewRuntimeServiceClient(cc)
		const args = `{"path":"/public/a.txt"}`

		// ended checks the turn's one record says what its client was
		// told, and that the turn closes at once with no call in flight.
		ended := func(t *testing.T, turn string, res *sharedosv1.ToolResult, err error, reason string) {
			t.Helper()
			h.mu.Lock()
			h.attempts[turn]++ // one attempt, whatever its answer
			h.mu.Unlock()
			if err != nil {
				t.Errorf("answer: %v; want a result", err)
			} else {
				expect(t, res, failed, outcome.Internal)
				if res.GetReason() != reason {
					t.Errorf("reason %q, want %q", res.GetReason(), reason)
				}
			}
			rows := h.records(turn)
			if len(rows) != 1 || rows[0].Status != failed || rows[0].Code != outcome.Internal ||
				(err == nil && rows[0].Reason != res.GetReason()) {
				t.Errorf("records %+v; want one, failed/internal, saying what the answer says (%q)", rows, res.GetReason())
			}
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			revoked, err := client.RevokeTurn(rctx, &sharedosv1.RevokeTurnRequest{TurnId: turn})
			if err != nil || revoked.GetCancelled() != 0 {
				t.Errorf("RevokeTurn = %v, %v; want nothing in flight to cancel, nothing pending", revoked, err)
			}
		}

		t.Run("InvokeTool", func(t *testing.T) {
			resolver.panics.Store(true)
			res, err := client.InvokeTool(ctx, h.newCall("p-unary", "files.read", args))
			ended(t, "p-unary", res, err, notRun)
		})

		t.Run("InvokeToolStream", func(t *testing.T) {
			resolver.panics.Store(true)
			sctx, cancel := context.WithCancel(ctx)
			defer cancel()
			stream, err := client.InvokeToolStream(sctx, h.newCall("p-stream", "files.read", args))
			var res *sharedosv1.ToolResult
			for err == nil && res == nil {
				var ev *sharedosv1.ToolEvent
				if ev, err = stream.Recv(); err == nil {
					res = ev.GetResult()
				} else if errors.Is(err, io.EOF) {
					err = errors.New("the stream ended without a result")
				}
			}
			ended(t, "p-stream", res, err, notRun)
		})

		t.Run("resumed round", func(t *testing.T) {
			resolver.panics.Store(false)
			h.handler.asks(askTwice)
			t.Cleanup(func() { h.handler.asks(nil) })
			first, err := client.InvokeTool(ctx, h.roundCall("p-round", args, inputround.Names()...))
			if err != nil {
				t.Fatal(err)
			}
			expect(t, first, inputRequired, "")
			resolver.panics.Store(true) // the retry is resolved again, and panics
			res, err := client.InvokeTool(ctx, h.resumeCall("p-round", args, first, `{"name":{"action":"accept","content":{"name":"Ada"}}}`))
			ended(t, "p-round", res, err, mayHaveRun)
		})
	})
}

// panickingFormat is a JSON Schema format whose check panics: a bug in the
// schema validator, reached while the kernel validates the arguments.
var panickingFormat = &jsonschema.Format{Name: "panics", Validate: func(any) error { panic("validator bug") }}

// answersThenPanics is a provider client after which the kernel panics:
// the provider ran the call and answered.
type answersThenPanics struct {
	sharedosv1.ToolHandlerServiceClient
}

func (c answersThenPanics) Handle(ctx context.Context, req *sharedosv1.HandleRequest, opts ...grpc.CallOption) (*sharedosv1.HandleResponse, error) {
	_, _ = c.ToolHandlerServiceClient.Handle(ctx, req, opts...)
	panic("kernel bug after the provider answered")
}

// panickingClients hands out answersThenPanics clients.
type panickingClients struct{ *pipeline.ConnCache }

func (p panickingClients) Client(target string) (sharedosv1.ToolHandlerServiceClient, error) {
	c, err := p.ConnCache.Client(target)
	return answersThenPanics{c}, err
}

// TestAPanicSaysWhetherTheToolMayHaveRun (attack run F2): a panic in the
// kernel ends the attempt failed/internal, and what it says of the tool
// is true — "the call was not run" for a panic before the dispatch, here
// the schema validator's own while it validates the arguments (the
// attack's 1e-1000001 under exclusiveMinimum dereferenced nil in it), and
// neither authz-svc nor the provider is asked; "the tool may have run"
// for one after the provider was called, here once it answered. Before,
// both said the tool may have run. The record says what the answer says.
func TestAPanicSaysWhetherTheToolMayHaveRun(t *testing.T) {
	forEachStore(t, options{}, func(t *testing.T, h *harness) {
		ctx := context.Background()
		files, _ := h.resolver.Resolve(ctx, "files.read")
		target := files.Registration.GetHandler().GetTarget()
		const schema = `{"type":"object","properties":{"x":{"type":"string","format":"panics"}}}`
		h.resolver.add(t, "test.validator_bug", schema, "read", "file:/public/a.txt", target, sharedosv1.ToolClass_TOOL_CLASS_MANAGED, 0)
		c := jsonschema.NewCompiler()
		c.RegisterFormat(panickingFormat)
		c.AssertFormat()
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.AddResource("mem://bug", doc); err != nil {
			t.Fatal(err)
		}
		r, _ := h.resolver.Resolve(ctx, "test.validator_bug")
		if r.InputSchema, err = c.Compile("mem://bug"); err != nil {
			t.Fatal(err)
		}
		owned := pipeline.NewConnCache()
		t.Cleanup(func() { _ = owned.Close() })
		k, err := pipeline.New(pipeline.Config{
			Resolver: h.resolver, Records: h.store, Authz: h.authzClient, Grants: testKeys, Handlers: panickingClients{owned},
			InstanceID: "test-kernel", Logger: quiet,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { k.Close() })

		for _, c := range []struct {
			turn, tool, args, reason string
			authz, handler           int64
		}{
			{"bug-validating", "test.validator_bug", `{"x":"y"}`, notRun, 0, 0},
			{"bug-after-the-tool", "files.read", `{"path":"/public/a.txt"}`, mayHaveRun, 1, 1},
		} {
			authz, handler := h.authz.calls.Load(), h.handler.calls.Load()
			res, err := k.InvokeTool(ctx, h.newCall(c.turn, c.tool, c.args))
			if err != nil {
				t.Fatalf("%s: %v; want a result", c.turn, err)
			}
			h.mu.Lock()
			h.attempts[c.turn]++
			h.mu.Unlock()
			expect(t, res, failed, outcome.Internal)
			if res.GetReason() != c.reason {
				t.Errorf("%s: reason %q, want %q", c.turn, res.GetReason(), c.reason)
			}
			if rows := h.records(c.turn); len(rows) != 1 || rows[0].Code != outcome.Internal || rows[0].Reason != c.reason {
				t.Errorf("%s: records %+v; want one, failed/internal, %q", c.turn, rows, c.reason)
			}
			if a, n := h.authz.calls.Load()-authz, h.handler.calls.Load()-handler; a != c.authz || n != c.handler {
				t.Errorf("%s: authz-svc asked %d times, the provider %d; want %d, %d", c.turn, a, n, c.authz, c.handler)
			}
		}
	})
}
