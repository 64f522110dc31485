package pipeline_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/outcome"
	"github.com/sharedos/toolshare/services/contract/redact"
	"github.com/sharedos/toolshare/services/platform/grpcx"

	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline"
	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline/records"
	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline/records/journal"
	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline/records/memory"
)

const (
	succeeded = sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED
	denied    = sharedosv1.OperationStatus_OPERATION_STATUS_DENIED
	failed    = sharedosv1.OperationStatus_OPERATION_STATUS_FAILED
	cancelled = sharedosv1.OperationStatus_OPERATION_STATUS_CANCELLED
)

func TestAllowedRead(t *testing.T) {
	forEachStore(t, options{}, func(t *testing.T, h *harness) {
		args := `{"path":"/public/a.txt"}`
		res := h.call("t", "files.read", args)
		expect(t, res, succeeded, "")
		if !strings.Contains(text(res), "Hello from /public/a.txt") || res.GetDecisionId() != "dec-allow" || res.GetPolicyRevision() != "rev-1" {
			t.Fatalf("result = %v", res)
		}
		rows := h.records("t")
		if len(rows) != 1 {
			t.Fatalf("rows = %d", len(rows))
		}
		r := rows[0]
		sum := sha256.Sum256([]byte(args))
		if r.Status != succeeded || r.ResolvedTool != "files.read" || r.RequestedTool != "files.read" ||
			r.ArgumentsDigest != "sha256:"+hex.EncodeToString(sum[:]) || r.DecisionID != "dec-allow" || r.PolicyRevision != "rev-1" ||
			r.Principal != "alice" || r.Tenant != "acme" || r.CatalogHash != strings.Repeat("ab", 32) || r.InstanceID != "test-kernel" ||
			r.FinishedAt.Before(r.StartedAt) || r.CallID != res.GetCallId() {
			t.Fatalf("record = %+v", r)
		}
		if strings.Contains(r.Reason+r.RequestedTool, "Hello") {
			t.Fatal("record carries argument or result content")
		}
	})
}

func TestDeniedPrivate(t *testing.T) {
	forEachStore(t, options{}, func(t *testing.T, h *harness) {
		res := h.call("t", "files.read", `{"path":"/private/a.txt"}`)
		expect(t, res, denied, outcome.PermissionDenied)
		if !strings.Contains(outcome.Text(res), "denied: principal alice may not read /private/a.txt") || res.GetDecisionId() != "dec-deny" {
			t.Fatalf("result = %v / %q", res, outcome.Text(res))
		}
		if n := h.handler.calls.Load(); n != 0 {
			t.Fatalf("handler ran %d times", n)
		}
		if r := h.records("t")[0]; r.Code != outcome.PermissionDenied || r.DecisionID != "dec-deny" || r.PolicyRevision != "rev-1" {
			t.Fatalf("record = %+v", r)
		}
	})
}

// TestTraversal: every spelling either reaches the policy as the object the
// handler would touch (and is denied), or stays a literal path the handler
// cannot find, or is refused by the provider. Private bytes never come back.
func TestTraversal(t *testing.T) {
	forEachStore(t, options{}, func(t *testing.T, h *harness) {
		cases := []struct {
			path, resource string
			st             sharedosv1.OperationStatus
			code           string
		}{
			{`/public/../private/a.txt`, "file:/private/a.txt", denied, outcome.PermissionDenied},
			{`/public/./..//private/a.txt`, "file:/private/a.txt", denied, outcome.PermissionDenied},
			{`/publicity/a.txt`, "file:/publicity/a.txt", denied, outcome.PermissionDenied},
			{`\\public\\..\\private`, "file:/private", denied, outcome.PermissionDenied},
			{`\\public\\..\\private\\a.txt`, "file:/private/a.txt", denied, outcome.PermissionDenied},
			{`public/../../private/a.txt`, "file:/private/a.txt", denied, outcome.PermissionDenied},
			{`/public/%2e%2e/private/a.txt`, "file:/public/%2e%2e/private/a.txt", failed, outcome.HandlerError},
			{"/public/\uff0e\uff0e/private/a.txt", "file:/public/\uff0e\uff0e/private/a.txt", failed, outcome.HandlerError},
			{`/public/link-to-private`, "file:/public/link-to-private", failed, outcome.HandlerError},
		}
		for i, c := range cases {
			turn := "t" + itoa(i)
			before := h.handler.calls.Load()
			res := h.call(turn, "files.read", `{"path":"`+c.path+`"}`)
			expect(t, res, c.st, c.code)
			seen := h.authz.resources()
			if got := seen[len(seen)-1]; got != c.resource {
				t.Errorf("%s: policy saw %q, want %q", c.path, got, c.resource)
			}
			if strings.Contains(text(res), "PRIVATE") {
				t.Errorf("%s: private content returned: %s", c.path, text(res))
			}
			ran := h.handler.calls.Load() - before
			if (c.st == denied) != (ran == 0) {
				t.Errorf("%s: handler ran %d times", c.path, ran)
			}
		}
		// The link is refused by the provider, and the model is told why.
		res := h.call("link", "files.read", `{"path":"/public/link-to-private"}`)
		if !res.GetHandlerIsError() || !strings.Contains(text(res), "symbolic link") {
			t.Fatalf("link result = %v", res)
		}
	})
}

func TestUnknownNames(t *testing.T) {
	forEachStore(t, options{}, func(t *testing.T, h *harness) {
		names := []string{"files read", "fílés.read", strings.Repeat("a", 129), "", "github.delete_repo",
			"files\u2024read", "a/b", "files.read\x00", "files.\xffread", "FILES.READ", "mcp__sharedos__files_read",
			strings.Repeat("\x00", 400)}
		for i, name := range names {
			turn := "u" + itoa(i)
			res := h.call(turn, name, `{"path":"/public/a.txt"}`)
			expect(t, res, denied, outcome.ToolUnavailable)
			if !strings.HasPrefix(outcome.Text(res), "denied: ") {
				t.Errorf("text %q", outcome.Text(res))
			}
			rows := h.records(turn)
			if len(rows) != 1 {
				t.Fatalf("%q: %d rows", name, len(rows))
			}
			esc, sum := records.EscapeTool(name)
			if rows[0].RequestedTool != esc || rows[0].RequestedToolSHA256 != sum || rows[0].ResolvedTool != "" || rows[0].Code != outcome.ToolUnavailable {
				t.Errorf("%q: record %+v", name, rows[0])
			}
		}
		if h.authz.calls.Load() != 0 || h.handler.calls.Load() != 0 {
			t.Fatalf("authz %d / handler %d calls for unknown tools", h.authz.calls.Load(), h.handler.calls.Load())
		}
	})
}

func TestOutsidePinDriftDeregisteredUnmanaged(t *testing.T) {
	forEachStore(t, options{}, func(t *testing.T, h *harness) {
		// Outside the pin: registered, but the turn was not given it.
		c := h.newCall("p", "files.write", `{"path":"/public/x","content":"x"}`)
		kept := h.resolver.pin()
		delete(kept, "files.write")
		c.Grant = grantFor(t, "p", kept)
		res, err := h.invoke(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		expect(t, res, denied, outcome.ToolUnavailable)

		// An empty pin: nothing is callable.
		c = h.newCall("p", "files.read", `{"path":"/public/a.txt"}`)
		c.Grant = grantFor(t, "p", nil)
		res, _ = h.invoke(context.Background(), c)
		expect(t, res, denied, outcome.ToolUnavailable)

		// Drift: the definition changed after the turn pinned it.
		c = h.newCall("p", "files.read", `{"path":"/public/a.txt"}`)
		drifted := h.resolver.pin()
		drifted["files.read"] = strings.Repeat("0", 64)
		c.Grant = grantFor(t, "p", drifted)
		res, _ = h.invoke(context.Background(), c)
		expect(t, res, denied, outcome.ToolUnavailable)
		if !strings.Contains(res.GetReason(), "changed") {
			t.Errorf("drift reason %q", res.GetReason())
		}

		// Deregistered after pinning.
		c = h.newCall("p", "files.search", `{"query":"x","path":"/public"}`)
		h.resolver.mu.Lock()
		delete(h.resolver.tools, "files.search")
		h.resolver.mu.Unlock()
		res, _ = h.invoke(context.Background(), c)
		expect(t, res, denied, outcome.ToolUnavailable)

		// Not a managed tool.
		res = h.call("p", "test.local", `{"path":"/public/a.txt"}`)
		expect(t, res, denied, outcome.ToolUnavailable)

		if h.authz.calls.Load() != 0 || h.handler.calls.Load() != 0 {
			t.Fatal("a refused tool reached authz or the handler")
		}
		if rows := h.records("p"); len(rows) != 5 {
			t.Fatalf("rows = %d", len(rows))
		}
	})
}

func TestSchemaViolations(t *testing.T) {
	forEachStore(t, options{}, func(t *testing.T, h *harness) {
		deep := strings.Repeat("[", 100000) + strings.Repeat("]", 100000)
		cases := []struct{ tool, args, want string }{
			{"files.read", `{"path":7}`, "/path"},
			{"files.read", `{}`, "missing"},
			{"files.read", `{"path":"/public/a.txt","mode":"x"}`, "mode"},
			{"files.read", `{"path":""}`, "/path"},
			{"files.search", `{"query":"x","path":"/public","limit":"5"}`, "/limit"},
			{"files.search", `{"query":"x","path":"/public","limit":1000}`, "/limit"},
			{"files.write", `{"path":"/public/x","content":"` + strings.Repeat("a", 1<<20) + `"}`, "limit"},
			{"files.read", `[]`, "not a JSON object"},
			{"files.read", `"x"`, "not a JSON object"},
			{"files.read", `null`, "not a JSON object"},
			{"files.read", `{"path":"/public/a.txt"`, "valid JSON"},
			{"files.read", `{"path":"/public/a.txt"}{}`, "more than one JSON value"},
			{"files.read", `{"path":"/public/a.txt","path":"/private/a.txt"}`, "twice"},
			{"files.read", "{\"path\":\"/public/\xff.txt\"}", "UTF-8"},
			{"files.read", `{"path":"/public/a.txt","x":` + deep + `}`, "nested deeper"},
			{"files.read", `{"path":"/public/a.txt\u0000.png"}`, "NUL"},
			// Within the schema's 4,096 bytes, but "file:" + path is over
			// the resource cap authz-svc enforces (issue 17, item 6).
			{"files.read", `{"path":"/public/` + strings.Repeat("a", 4096-len("/public/")) + `"}`, "longer than 4096 bytes"},
			// Within the schema (an integer, 1..100), but longer than the
			// number authz-svc evaluates: the model's invalid argument, not
			// an authorization failure.
			{"files.search", `{"query":"x","path":"/public","limit":5.` + strings.Repeat("0", pipeline.MaxNumberChars-1) + `}`, "a number of 129 characters; the limit is 128"},
			// More values, or objects and arrays, than authz-svc builds of
			// arguments (1 MiB of {"x":{}} cost it 112 MB): the model's
			// invalid argument, not an authorization failure.
			{"files.read", `{"path":"/public/a.txt","x":[` + strings.Repeat(`1,`, pipeline.MaxArgumentValues) + `1]}`, "more than 65536 JSON values"},
			{"files.read", `{"path":"/public/a.txt","x":[` + strings.Repeat(`{"x":{}},`, 100_000) + `{}]}`, "more than 16384 objects and arrays"},
		}
		for i, c := range cases {
			turn := "s" + itoa(i)
			res := h.call(turn, c.tool, c.args)
			expect(t, res, failed, outcome.InvalidArguments)
			if !strings.Contains(res.GetReason(), c.want) {
				t.Errorf("%.60s: reason %q does not name %q", c.args, res.GetReason(), c.want)
			}
			if !strings.HasPrefix(outcome.Text(res), "failed: invalid arguments") {
				t.Errorf("text %q", outcome.Text(res))
			}
			if rows := h.records(turn); len(rows) != 1 || rows[0].ResolvedTool != c.tool {
				t.Errorf("%.60s: rows %+v", c.args, rows)
			}
		}
		if h.authz.calls.Load() != 0 || h.handler.calls.Load() != 0 {
			t.Fatalf("invalid arguments reached authz (%d) or the handler (%d)", h.authz.calls.Load(), h.handler.calls.Load())
		}
	})
}

func TestEmptyArgumentsAreAnEmptyObject(t *testing.T) {
	forEachStore(t, options{}, func(t *testing.T, h *harness) {
		res := h.call("e", "files.read", ``)
		expect(t, res, failed, outcome.InvalidArguments)
		if !strings.Contains(res.GetReason(), "missing") {
			t.Fatalf("reason %q", res.GetReason())
		}
	})
}

func TestArgumentsReachHandlerByteIdentical(t *testing.T) {
	forEachStore(t, options{}, func(t *testing.T, h *harness) {
		args := " {\n \"path\" :\t\"/public/\\u0061.txt\" } "
		res := h.call("b", "files.read", args)
		expect(t, res, succeeded, "")
		h.authz.mu.Lock()
		authorized := h.authz.last.GetArgumentsJson()
		h.authz.mu.Unlock()
		h.handler.mu.Lock()
		dispatched := h.handler.lastArgs
		h.handler.mu.Unlock()
		if !bytes.Equal(authorized, []byte(args)) || !bytes.Equal(dispatched, []byte(args)) {
			t.Fatalf("authorized %q, dispatched %q, sent %q", authorized, dispatched, args)
		}
		if h.records("b")[0].ArgumentsDigest != redact.ArgumentsDigest([]byte(args)) {
			t.Fatal("recorded digest is not over the sent bytes")
		}
	})
}

func TestAuthzUnavailable(t *testing.T) {
	t.Run("stopped", func(t *testing.T) {
		forEachStore(t, options{authzAddr: "127.0.0.1:1"}, func(t *testing.T, h *harness) {
			res := h.call("a", "files.read", `{"path":"/public/a.txt"}`)
			expect(t, res, failed, outcome.AuthzUnavailable)
			if h.handler.calls.Load() != 0 {
				t.Fatal("handler ran without a decision")
			}
		})
	})
	t.Run("hangs past deadline", func(t *testing.T) {
		forEachStore(t, options{authzTimeout: 50 * time.Millisecond}, func(t *testing.T, h *harness) {
			h.authz.mode.Store("hang")
			res := h.call("a", "files.read", `{"path":"/public/a.txt"}`)
			expect(t, res, failed, outcome.AuthzUnavailable)
			if h.handler.calls.Load() != 0 {
				t.Fatal("handler ran without a decision")
			}
		})
	})
	t.Run("evaluation error", func(t *testing.T) {
		forEachStore(t, options{}, func(t *testing.T, h *harness) {
			h.authz.mode.Store("error")
			res := h.call("a", "files.read", `{"path":"/public/a.txt"}`)
			expect(t, res, failed, outcome.AuthzError)
			if strings.Contains(res.GetReason(), "eval_type_error") {
				t.Fatal("PDP error text leaked into the reason")
			}
			h.authz.mode.Store("undecided")
			res = h.call("a", "files.read", `{"path":"/public/a.txt"}`)
			expect(t, res, failed, outcome.AuthzError)
			// authz-svc answered in time that its evaluation did not:
			// DeadlineExceeded, but a policy's failure, not authz-svc's.
			h.authz.mode.Store("eval timeout")
			res = h.call("a", "files.read", `{"path":"/public/a.txt"}`)
			expect(t, res, failed, outcome.AuthzError)
			if h.handler.calls.Load() != 0 {
				t.Fatal("handler ran without an allow")
			}
		})
	})
	// authz-svc refusing the request before evaluating it (InvalidArgument:
	// arguments past a bound of its own the kernel did not check) made no
	// decision either: failed/authz_error, recorded, nothing run.
	t.Run("request refused", func(t *testing.T) {
		forEachStore(t, options{}, func(t *testing.T, h *harness) {
			h.authz.mode.Store("refused")
			res := h.call("r", "files.read", `{"path":"/public/a.txt"}`)
			expect(t, res, failed, outcome.AuthzError)
			if rows := h.records("r"); len(rows) != 1 || rows[0].Status != failed || rows[0].Code != outcome.AuthzError {
				t.Errorf("records %+v, want one failed/authz_error", rows)
			}
			if h.authz.calls.Load() != 1 || h.handler.calls.Load() != 0 {
				t.Fatalf("authz asked %d times, handler ran %d times", h.authz.calls.Load(), h.handler.calls.Load())
			}
		})
	})
}

func TestHandlerTimeout(t *testing.T) {
	forEachStore(t, options{}, func(t *testing.T, h *harness) {
		// Warm the handler connection so the call reaches the handler well
		// within its timeout.
		expect(t, h.call("warm", "files.read", `{"path":"/public/a.txt"}`), succeeded, "")
		res := h.call("h", "test.quick_timeout", `{}`)
		expect(t, res, failed, outcome.Timeout)
		wait(t, h.handler.started, "handler start")
		if err := wait(t, h.handler.ended, "handler end"); !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			t.Fatalf("handler context ended with %v", err)
		}
		if r := h.records("h")[0]; r.Code != outcome.Timeout || r.DecisionID != "dec-allow" {
			t.Fatalf("record = %+v", r)
		}
	})
}

func TestCancellation(t *testing.T) {
	forEachStore(t, options{}, func(t *testing.T, h *harness) {
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			<-h.handler.started
			cancel()
		}()
		defer cancel()
		res, err := h.invoke(ctx, h.newCall("c", "test.sleep", `{}`))
		if err != nil {
			t.Fatal(err)
		}
		expect(t, res, cancelled, outcome.Cancelled)
		if err := wait(t, h.handler.ended, "handler end"); !errors.Is(err, context.Canceled) {
			t.Fatalf("handler context ended with %v, want Canceled", err)
		}
		if r := h.records("c")[0]; r.Status != cancelled {
			t.Fatalf("record = %+v", r)
		}
	})
}

func TestCancelledBeforeDispatch(t *testing.T) {
	forEachStore(t, options{}, func(t *testing.T, h *harness) {
		ctx, cancel := context.WithCancel(context.Background())
		h.authz.mode.Store("hang")
		go func() {
			<-h.authz.hanging
			cancel()
		}()
		defer cancel()
		res, err := h.invoke(ctx, h.newCall("c", "files.read", `{"path":"/public/a.txt"}`))
		if err != nil {
			t.Fatal(err)
		}
		expect(t, res, cancelled, outcome.Cancelled)
		if h.handler.calls.Load() != 0 {
			t.Fatal("handler ran after cancellation")
		}
	})
}

func TestDuplicateCallID(t *testing.T) {
	forEachStore(t, options{}, func(t *testing.T, h *harness) {
		c := h.newCall("d", "files.write", `{"path":"/public/new.txt","content":"once"}`)
		res, err := h.invoke(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		expect(t, res, succeeded, "")
		for range 2 {
			res, err = h.invoke(context.Background(), c)
			if err != nil {
				t.Fatal(err)
			}
			expect(t, res, denied, outcome.DuplicateCall)
			if res.GetCallId() != c.CallId {
				t.Fatalf("call id %q", res.GetCallId())
			}
		}
		if n := h.handler.calls.Load(); n != 1 {
			t.Fatalf("handler ran %d times for one call id", n)
		}
		rows := h.records("d")
		if len(rows) != 3 || rows[0].Status != succeeded || !rows[1].Duplicate || rows[2].Code != outcome.DuplicateCall {
			t.Fatalf("rows = %+v", rows)
		}
	})
}

func TestHandlerFailures(t *testing.T) {
	forEachStore(t, options{}, func(t *testing.T, h *harness) {
		res := h.call("f", "test.unreachable", `{"path":"/public/a.txt"}`)
		expect(t, res, failed, outcome.HandlerError)

		res = h.call("f", "files.read", `{"path":"/public/missing.txt"}`)
		expect(t, res, failed, outcome.HandlerError)
		if !res.GetHandlerIsError() || !strings.Contains(text(res), "not found: /public/missing.txt") {
			t.Fatalf("tool error not passed through: %v", res)
		}

		h.handler.mu.Lock()
		h.handler.answer = &sharedosv1.HandleResponse{ContentJson: []byte(`{"type":"text"}`)}
		h.handler.mu.Unlock()
		res = h.call("f", "files.read", `{"path":"/public/a.txt"}`)
		expect(t, res, failed, outcome.HandlerError)
		if strings.Contains(text(res), "type") {
			t.Fatal("malformed content passed through")
		}
	})
}

// failingStore injects record-store faults around a real store.
type failingStore struct {
	records.Store
	failBegin bool
	// failComplete fails every Complete while set; failNext fails the next
	// n Completes.
	failComplete atomic.Bool
	failNext     atomic.Int32
	completes    atomic.Int32
	// onFail, when set, runs after each failed Complete.
	onFail func()
}

func (f *failingStore) Begin(ctx context.Context, r *records.Record) error {
	if f.failBegin {
		return errInjected
	}
	return f.Store.Begin(ctx, r)
}

func (f *failingStore) Complete(ctx context.Context, id string, c records.Completion) error {
	f.completes.Add(1)
	if f.failComplete.Load() || f.failNext.Add(-1) >= 0 {
		if f.onFail != nil {
			f.onFail()
		}
		return errInjected
	}
	return f.Store.Complete(ctx, id, c)
}

func TestRecordUnavailableRunsNothing(t *testing.T) {
	forEachStore(t, options{wrapStore: func(s records.Store) records.Store { return &failingStore{Store: s, failBegin: true} }},
		func(t *testing.T, h *harness) {
			_, err := h.invoke(context.Background(), h.newCall("r", "files.write", `{"path":"/public/x.txt","content":"x"}`))
			if status.Code(err) != codes.Unavailable || strings.Contains(err.Error(), "injected") {
				t.Fatalf("err = %v, want a clean Unavailable", err)
			}
			var reason string
			for _, d := range status.Convert(err).Details() {
				if info, ok := d.(*errdetails.ErrorInfo); ok {
					reason = info.GetReason()
				}
			}
			if reason != pipeline.ErrRecordUnavailable.ErrorReason() {
				t.Fatalf("ErrorInfo reason %q", reason)
			}
			if h.authz.calls.Load() != 0 || h.handler.calls.Load() != 0 {
				t.Fatal("something ran without a record")
			}
		})
}

// The answer never says more than the record will (ADR 0007): a completion
// the store refuses for a while is retried before the answer leaves.
func TestCompletionWaitsForTheStore(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			store, _ := b.open(t)
			fs := &failingStore{Store: store}
			fs.failNext.Store(3)
			k := newKernelOnly(t, fs, "pod-a")
			res, err := k.InvokeTool(context.Background(), &sharedosv1.ToolCall{CallId: "c1", TurnId: "w", Tool: "nope", ArgumentsJson: []byte(`{}`), Grant: grantFor(t, "w", nil)})
			if err != nil {
				t.Fatal(err)
			}
			expect(t, res, denied, outcome.ToolUnavailable)
			if n := fs.completes.Load(); n != 4 {
				t.Fatalf("%d completion writes, want 3 failed + 1", n)
			}
			recs, _ := store.ListOperations(context.Background(), "w")
			if len(recs) != 1 || recs[0].Status != denied || recs[0].Code != outcome.ToolUnavailable || k.Journaled() != 0 {
				t.Fatalf("rows = %+v, journaled %d", recs, k.Journaled())
			}
		})
	}
}

// With no durable journal and the store down past the caller's deadline the
// answer says what is true (failed/record_unavailable, naming the outcome)
// and the record says exactly that once the store is back. Until then the
// row is pending and no reconcile may call it interrupted.
func TestCompletionPastTheDeadline(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			store, rows := b.open(t)
			fs := &failingStore{Store: store}
			fs.failComplete.Store(true)
			k := newKernelOnly(t, fs, "pod-a")
			// The wait for the store ends before the caller's deadline,
			// with room left for the answer on a loaded machine.
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			res, err := k.InvokeTool(ctx, &sharedosv1.ToolCall{CallId: "c1", TurnId: "d", Tool: "nope", ArgumentsJson: []byte(`{}`), Grant: grantFor(t, "d", nil)})
			if err != nil {
				t.Fatal(err)
			}
			if ctx.Err() != nil {
				t.Fatal("the answer left after the caller's deadline")
			}
			expect(t, res, failed, outcome.RecordUnavailable)
			if !strings.Contains(res.GetReason(), "denied/tool_unavailable") || !strings.Contains(res.GetReason(), "may have happened") {
				t.Fatalf("reason %q does not say the outcome and the uncertainty", res.GetReason())
			}
			if k.Journaled() != 1 {
				t.Fatalf("journaled %d, want 1", k.Journaled())
			}
			// Another kernel reconciling must not turn it interrupted, and
			// neither may this one while the completion waits.
			other := newKernelOnly(t, store, "pod-b")
			if n, err := other.ReconcileAtStartup(context.Background()); err != nil || n != 0 {
				t.Fatalf("pod-b ReconcileAtStartup = %d, %v", n, err)
			}
			if n, err := k.Reconcile(context.Background()); err != nil || n != 0 {
				t.Fatalf("Reconcile with a journaled completion = %d, %v", n, err)
			}
			// The store comes back: the flusher writes what the client was told.
			fs.failComplete.Store(false)
			rctx, stop := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); k.RunJournal(rctx) }()
			deadline := time.Now().Add(10 * time.Second)
			for k.Journaled() != 0 {
				if time.Now().After(deadline) {
					t.Fatal("journaled completion not written within 10s of the store's return")
				}
				time.Sleep(5 * time.Millisecond)
			}
			stop()
			<-done
			recs, _ := store.ListOperations(context.Background(), "d")
			if len(recs) != 1 || rows() != 1 || recs[0].Status != failed || recs[0].Code != outcome.RecordUnavailable ||
				recs[0].Reason != res.GetReason() {
				t.Fatalf("record %+v, want exactly the answer %v", recs, res)
			}
		})
	}
}

// A client that leaves while its completion waits for the store ends the
// wait: nobody reads the answer, and the record gets the true outcome once
// the store is back (not record_unavailable, which no client was told).
func TestCompletionClientLeaves(t *testing.T) {
	store := memory.New()
	fs := &failingStore{Store: store}
	fs.failComplete.Store(true)
	k := newKernelOnly(t, fs, "pod-a")
	ctx, cancel := context.WithCancel(context.Background())
	// The client leaves once the first completion write has failed, while
	// the answer waits for the store.
	fs.onFail = sync.OnceFunc(func() { go cancel() })
	start := time.Now()
	res, err := k.InvokeTool(ctx, &sharedosv1.ToolCall{CallId: "c1", TurnId: "l", Tool: "nope", ArgumentsJson: []byte(`{}`), Grant: grantFor(t, "l", nil)})
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("answered after %s: the wait did not end with the client", d)
	}
	expect(t, res, denied, outcome.ToolUnavailable)
	fs.failComplete.Store(false)
	if _, err := k.ReconcileAtStartup(context.Background()); err != nil { // flushes the queued completion
		t.Fatal(err)
	}
	recs, _ := store.ListOperations(context.Background(), "l")
	if len(recs) != 1 || recs[0].Status != denied || recs[0].Code != outcome.ToolUnavailable || k.Journaled() != 0 {
		t.Fatalf("record %+v (journaled %d), want the true outcome", recs, k.Journaled())
	}
}

// A durable journal backs the answer at once during an outage and survives
// the process: a restarted kernel writes the completion before it reconciles,
// so the row is completed, never interrupted. A process that died with its
// completion only in memory leaves the row pending, and its restart marks it
// interrupted: nobody knows its outcome.
func TestCompletionJournaledAcrossRestart(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			store, _ := b.open(t)
			ctx := context.Background()
			dir := t.TempDir()
			jr, err := journal.Open(dir, quiet)
			if err != nil {
				t.Fatal(err)
			}
			fs := &failingStore{Store: store}
			fs.failComplete.Store(true)
			k := newKernelJournaled(t, fs, "pod-a", jr)
			res, err := k.InvokeTool(ctx, &sharedosv1.ToolCall{CallId: "c1", TurnId: "j", Tool: "nope", ArgumentsJson: []byte(`{}`), Grant: grantFor(t, "j", nil)})
			if err != nil {
				t.Fatal(err)
			}
			expect(t, res, denied, outcome.ToolUnavailable) // backed by the journal: the true outcome
			if fs.completes.Load() != 1 {
				t.Fatalf("%d completion writes before the answer, want 1 (then the journal)", fs.completes.Load())
			}
			// A memory-only kernel of pod-b dies with its completion queued.
			fb := &failingStore{Store: store}
			fb.failComplete.Store(true)
			kb := newKernelOnly(t, fb, "pod-b")
			kb.SetCompletionWait(100 * time.Millisecond)
			lost, _ := kb.InvokeTool(ctx, &sharedosv1.ToolCall{CallId: "c2", TurnId: "j", Tool: "nope", ArgumentsJson: []byte(`{}`), Grant: grantFor(t, "j", nil)})
			expect(t, lost, failed, outcome.RecordUnavailable)
			// pod-a "crashes" (its files closed, the journal left on disk).
			_ = jr.Close()
			if b, _ := os.ReadDir(dir); len(b) != 1 {
				t.Fatalf("journal dir holds %v, want the one file", b)
			}

			jr2, err := journal.Open(dir, quiet)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { jr2.Close() })
			restarted := newKernelJournaled(t, store, "pod-a", jr2)
			if n, err := restarted.ReconcileAtStartup(ctx); err != nil || n != 0 {
				t.Fatalf("pod-a ReconcileAtStartup = %d, %v (want the journaled completion written, nothing interrupted)", n, err)
			}
			restartedB := newKernelOnly(t, store, "pod-b")
			if n, err := restartedB.ReconcileAtStartup(ctx); err != nil || n != 1 {
				t.Fatalf("pod-b ReconcileAtStartup = %d, %v (want its lost completion interrupted)", n, err)
			}
			recs, _ := store.ListOperations(ctx, "j")
			if len(recs) != 2 || recs[0].Status != denied || recs[0].Code != outcome.ToolUnavailable ||
				recs[1].Status != sharedosv1.OperationStatus_OPERATION_STATUS_INTERRUPTED {
				t.Fatalf("rows = %+v", recs)
			}
			if restarted.Journaled() != 0 {
				t.Fatalf("journaled %d after the replay", restarted.Journaled())
			}
		})
	}
}

func TestReconcileByAge(t *testing.T) {
	store := memory.New()
	old := &records.Record{AttemptID: records.NewAttemptID(), CallID: "c", TurnID: "t", InstanceID: "gone",
		StartedAt: time.Now().Add(-10 * time.Minute)}
	if err := store.Begin(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	k := newKernelOnly(t, store, "")
	// A 10-minute-old pending row may still be in flight under the default
	// bound (15 min handlers), but not under a 1-minute one.
	k2, err := pipeline.New(pipeline.Config{Resolver: &fakeResolver{}, Records: store, Authz: sharedosv1.NewAuthzServiceClient(nil),
		MaxHandlerTimeout: time.Minute, DefaultHandlerTimeout: time.Second, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k2.Close() })
	if d := k2.MaxCallDuration(); d != pipeline.BeginTimeout+pipeline.RevocationReadTimeout+pipeline.DefaultAuthzTimeout+time.Minute {
		t.Fatalf("MaxCallDuration = %v: want the pending row's write, the revocation read, authz and the handler", d)
	}
	// The row's write is bounded on its own, also under a caller's later
	// deadline (the bridge's --call-timeout), so the cutoff holds.
	bctx, cancel := pipeline.BeginContextForTest(tctx(t, time.Hour))
	defer cancel()
	if d, ok := bctx.Deadline(); !ok || time.Until(d) > pipeline.BeginTimeout {
		t.Fatalf("pending row written under deadline %v (%v), want at most %v from now", d, ok, pipeline.BeginTimeout)
	}
	if n, err := k.Reconcile(context.Background()); err != nil || n != 0 {
		t.Fatalf("default bound (15 min) reconciled %d, %v", n, err)
	}
	if n, err := k2.Reconcile(context.Background()); err != nil || n != 1 {
		t.Fatalf("1-minute bound reconciled %d, %v", n, err)
	}
}

func newKernelOnly(t *testing.T, store records.Store, instance string) *pipeline.Pipeline {
	t.Helper()
	return newKernelJournaled(t, store, instance, nil)
}

func newKernelJournaled(t *testing.T, store records.Store, instance string, jr *journal.Journal) *pipeline.Pipeline {
	t.Helper()
	cc, err := grpcx.Dial("127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	k, err := pipeline.New(pipeline.Config{Resolver: &fakeResolver{}, Records: store, Authz: sharedosv1.NewAuthzServiceClient(cc), Grants: testKeys,
		Logger: quiet, InstanceID: instance, Journal: jr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	return k
}

func TestOverGRPC(t *testing.T) {
	forEachStore(t, options{}, func(t *testing.T, h *harness) {
		addr := serveGRPC(t, func(s *grpcx.Server) { sharedosv1.RegisterRuntimeServiceServer(s.GRPC(), h.rpc) })
		cc, err := grpcx.Dial(addr)
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		client := sharedosv1.NewRuntimeServiceClient(cc)
		ctx := context.Background()
		for _, args := range []string{`{"path":"/public/a.txt"}`, `{"path":"/private/a.txt"}`} {
			c := h.newCall("g", "files.read", args)
			if _, err := client.InvokeTool(ctx, c); err != nil {
				t.Fatal(err)
			}
			h.mu.Lock()
			h.attempts["g"]++
			h.mu.Unlock()
		}
		// Hostile names cross the wire intact and are refused and recorded.
		// (Invalid UTF-8 cannot: proto3 strings reject it at marshal time.)
		for _, name := range []string{"files read", "files.read\x00", strings.Repeat("a", 129)} {
			res, err := client.InvokeTool(ctx, h.newCall("g2", name, `{"path":"/public/a.txt"}`))
			if err != nil {
				t.Fatal(err)
			}
			expect(t, res, denied, outcome.ToolUnavailable)
			h.mu.Lock()
			h.attempts["g2"]++
			h.mu.Unlock()
		}
		list, err := client.ListOperations(ctx, &sharedosv1.ListOperationsRequest{TurnId: "g"})
		if err != nil {
			t.Fatal(err)
		}
		ops := list.GetOperations()
		if len(ops) != 2 || ops[0].GetStatus() != succeeded || ops[1].GetStatus() != denied ||
			ops[0].GetSequence() >= ops[1].GetSequence() || ops[1].GetFinishedAt() == nil || ops[1].GetDecisionId() != "dec-deny" {
			t.Fatalf("operations = %v", ops)
		}
		for _, bad := range []*sharedosv1.ToolCall{
			{TurnId: "g", Tool: "files.read"},
			{CallId: "x", Tool: "files.read"},
			{CallId: "x\x00", TurnId: "g", Tool: "files.read"},
			{CallId: strings.Repeat("x", 257), TurnId: "g", Tool: "files.read"},
		} {
			if _, err := client.InvokeTool(ctx, bad); status.Code(err) != codes.InvalidArgument {
				t.Errorf("InvokeTool(%v) = %v, want InvalidArgument", bad, err)
			}
		}
		if _, err := client.ListOperations(ctx, &sharedosv1.ListOperationsRequest{}); status.Code(err) != codes.InvalidArgument {
			t.Errorf("ListOperations without turn = %v", err)
		}
	})
}

func TestTraceIDRecorded(t *testing.T) {
	forEachStore(t, options{}, func(t *testing.T, h *harness) {
		tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
		sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
		ctx := trace.ContextWithRemoteSpanContext(context.Background(),
			trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
		if _, err := h.invoke(ctx, h.newCall("tr", "nope", `{}`)); err != nil {
			t.Fatal(err)
		}
		if got := h.records("tr")[0].TraceID; got != tid.String() {
			t.Fatalf("trace id %q, want %s", got, tid)
		}
	})
}

func TestNewValidatesConfig(t *testing.T) {
	if _, err := pipeline.New(pipeline.Config{}); err == nil {
		t.Fatal("empty config accepted")
	}
}

// TestNoGoroutineLeft runs a success, a handler timeout and a cancellation on
// every backend and checks that once the servers, connections and pools are
// closed no goroutine survives (the handler's and the kernel's included).
func TestNoGoroutineLeft(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
	forEachStore(t, options{}, func(t *testing.T, h *harness) {
		expect(t, h.call("l", "files.read", `{"path":"/public/a.txt"}`), succeeded, "")
		expect(t, h.call("l", "test.quick_timeout", `{}`), failed, outcome.Timeout)
		wait(t, h.handler.started, "handler start")
		wait(t, h.handler.ended, "handler end")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			<-h.handler.started
			cancel()
		}()
		res, err := h.invoke(ctx, h.newCall("l", "test.sleep", `{}`))
		if err != nil {
			t.Fatal(err)
		}
		expect(t, res, cancelled, outcome.Cancelled)
		wait(t, h.handler.ended, "handler end")
	})
}

// inDoubtStore's Begin reports ErrInDoubt: after writing the row (written:
// a hung server resumed and ran the insert) or without (it never arrived).
type inDoubtStore struct {
	records.Store
	written bool
}

func (s *inDoubtStore) Begin(ctx context.Context, r *records.Record) error {
	if s.written {
		if err := s.Store.Begin(ctx, r); err != nil {
			return err
		}
	}
	return fmt.Errorf("%w: no answer from the store", records.ErrInDoubt)
}

// TestRecordInDoubtCompletedAsRefused (issue 17 item 13): a Begin whose
// insert may still take effect refuses the call (nothing runs), and the row,
// if it appears, is completed failed/record_unavailable from the journal —
// never left pending for the reconciler to call interrupted.
func TestRecordInDoubtCompletedAsRefused(t *testing.T) {
	for _, written := range []bool{true, false} {
		t.Run(fmt.Sprintf("written=%v", written), func(t *testing.T) {
			forEachStore(t, options{wrapStore: func(s records.Store) records.Store { return &inDoubtStore{Store: s, written: written} }},
				func(t *testing.T, h *harness) {
					_, err := h.invoke(context.Background(), h.newCall("r", "files.write", `{"path":"/public/x.txt","content":"x"}`))
					if status.Code(err) != codes.Unavailable {
						t.Fatalf("err = %v, want Unavailable", err)
					}
					if h.authz.calls.Load() != 0 || h.handler.calls.Load() != 0 {
						t.Fatal("something ran without a record")
					}
					h.kernel.DrainJournal(context.Background())
					if n := h.kernel.Journaled(); n != 0 {
						t.Fatalf("%d completions left in the journal", n)
					}
					rows := h.records("r")
					switch {
					case !written && len(rows) != 0:
						t.Fatalf("rows %+v, want none", rows)
					case written && (len(rows) != 1 || rows[0].Status != sharedosv1.OperationStatus_OPERATION_STATUS_FAILED ||
						rows[0].Code != outcome.RecordUnavailable):
						t.Fatalf("rows %+v, want one failed/record_unavailable", rows)
					case written:
						// The refused call has its row after all: the harness's
						// "nothing lost" check counts it as an attempt.
						h.mu.Lock()
						h.attempts["r"]++
						h.mu.Unlock()
					}
				})
		})
	}
}

// TestCancelledBeforeRecord: a call whose caller left before the kernel
// wrote its record is still recorded (invariant 4), cancelled, and runs
// nothing. (The record was skipped before: Begin ran on the caller's
// context.)
func TestCancelledBeforeRecord(t *testing.T) {
	forEachStore(t, options{}, func(t *testing.T, h *harness) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		res, err := h.invoke(ctx, h.newCall("c", "files.read", `{"path":"/public/a.txt"}`))
		if err != nil {
			t.Fatal(err)
		}
		expect(t, res, cancelled, outcome.Cancelled)
		if n := h.handler.calls.Load(); n != 0 {
			t.Fatalf("handler ran %d times", n)
		}
		if rows := h.records("c"); len(rows) != 1 || rows[0].Status != cancelled {
			t.Fatalf("rows = %+v, want one cancelled", rows)
		}
	})
}

// TestAbandonedCall: a call the bridge gave up on while sending it
// (ToolCall.abandoned) is recorded cancelled and never run when it had not
// arrived, and adds nothing when it had: one record per attempt either way.
func TestAbandonedCall(t *testing.T) {
	forEachStore(t, options{}, func(t *testing.T, h *harness) {
		lost := h.newCall("a", "files.read", `{"path":"/public/a.txt"}`)
		lost.Abandoned = true
		res, err := h.invoke(context.Background(), lost)
		if err != nil {
			t.Fatal(err)
		}
		expect(t, res, cancelled, outcome.Cancelled)
		if h.handler.calls.Load() != 0 {
			t.Fatal("an abandoned call ran")
		}
		rows := h.records("a")
		if len(rows) != 1 || rows[0].Status != cancelled || rows[0].Reason != pipeline.AbandonedReason || rows[0].CallID != lost.CallId {
			t.Fatalf("rows = %+v, want one cancelled for the abandoned call", rows)
		}
		// The call itself arriving after its abandonment was recorded (the
		// kernel ran its handler late): the same attempt, not run, not
		// recorded again. Not through h.invoke: no attempt of its own.
		late := proto.Clone(lost).(*sharedosv1.ToolCall)
		late.Abandoned = false
		res, err = h.rpc.InvokeTool(context.Background(), late)
		if err != nil {
			t.Fatal(err)
		}
		expect(t, res, cancelled, outcome.Cancelled)
		if h.handler.calls.Load() != 0 || len(h.records("a")) != 1 {
			t.Fatalf("a call arriving after its abandonment ran (%d) or was recorded again: %+v", h.handler.calls.Load(), h.records("a"))
		}

		// A resumption whose client left before it went out, of a round
		// that is not waiting (here: no such attempt): refused on a record
		// of its own, as it would be had it arrived.
		resumed := h.newCall("r", "files.read", `{"path":"/public/a.txt"}`)
		resumed.Abandoned = true
		resumed.Resume = &sharedosv1.Resume{AttemptId: "no-such-attempt", Round: 1}
		if res, err := h.invoke(context.Background(), resumed); err != nil || res.GetStatus() != cancelled {
			t.Fatalf("abandoned resumption of no round: %v %v", res, err)
		}
		if rows := h.records("r"); len(rows) != 1 || rows[0].Status != cancelled || rows[0].CallID != resumed.CallId {
			t.Fatalf("rows = %+v, want one cancelled for the abandoned resumption", rows)
		}

		// Given up on by the bridge for a reason of its own: recorded as
		// what the bridge answered, not run.
		timedOut := h.newCall("t", "files.read", `{"path":"/public/a.txt"}`)
		timedOut.Abandoned, timedOut.AbandonedCode = true, outcome.Timeout
		if res, err := h.invoke(context.Background(), timedOut); err != nil || res.GetStatus() != failed || res.GetCode() != outcome.Timeout {
			t.Fatalf("abandoned after the bridge's deadline: %v %v", res, err)
		}
		if rows := h.records("t"); len(rows) != 1 || rows[0].Status != failed || rows[0].Code != outcome.Timeout || !strings.Contains(rows[0].Reason, "not run") {
			t.Fatalf("rows = %+v, want one failed/timeout, not run", rows)
		}

		arrived := h.newCall("a", "files.read", `{"path":"/public/a.txt"}`)
		res, err = h.invoke(context.Background(), arrived)
		if err != nil {
			t.Fatal(err)
		}
		expect(t, res, succeeded, "")
		// Not through h.invoke: no attempt of its own.
		again := proto.Clone(arrived).(*sharedosv1.ToolCall)
		again.Abandoned = true
		for range 2 {
			res, err := h.rpc.InvokeTool(context.Background(), again)
			if err != nil {
				t.Fatal(err)
			}
			expect(t, res, cancelled, outcome.Cancelled)
		}
		if n := h.handler.calls.Load(); n != 1 {
			t.Fatalf("handler ran %d times, want once", n)
		}
		rows = h.records("a")
		if len(rows) != 2 || rows[1].Status != succeeded || rows[1].CallID != arrived.CallId {
			t.Fatalf("rows = %+v, want the abandoned call's and the arrived one's, once each", rows)
		}
	})
}

// tctx is a context with a deadline d from now, ended with the test.
func tctx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
