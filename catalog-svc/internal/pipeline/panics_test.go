package pipeline_test

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/inputround"
	"github.com/sharedos/toolshare/services/contract/outcome"
	"github.com/sharedos/toolshare/services/platform/grpcx"

	"github.com/sharedos/toolshare/catalog-svc/internal/catalog"
	"github.com/sharedos/toolshare/catalog-svc/internal/server"
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
// failed/internal, and the client is answered with exactly that result;
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
		ended := func(t *testing.T, turn string, res *sharedosv1.ToolResult, err error) {
			t.Helper()
			h.mu.Lock()
			h.attempts[turn]++ // one attempt, whatever its answer
			h.mu.Unlock()
			if err != nil {
				t.Errorf("answer: %v; want a result", err)
			} else {
				expect(t, res, failed, outcome.Internal)
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
			ended(t, "p-unary", res, err)
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
			ended(t, "p-stream", res, err)
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
			ended(t, "p-round", res, err)
		})
	})
}
