package app_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sharedos/toolshare/services/contract/redact"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/sharedos/toolshare/authz-svc/internal/app"
	"github.com/sharedos/toolshare/authz-svc/internal/pdp"
	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
)

var (
	engineer = &sharedosv1.AccessContext{Principal: "alice", Tenant: "acme", Roles: []string{"engineer"}}
	admin    = &sharedosv1.AccessContext{Principal: "root", Tenant: "acme", Roles: []string{"admin"}}
	nobody   = &sharedosv1.AccessContext{Principal: "eve", Tenant: "acme"}
)

func filesTool(name string) *sharedosv1.ToolFacts {
	return &sharedosv1.ToolFacts{Name: name, Namespace: "files", Class: "managed", Source: "provider:files",
		AnnotationsJson: []byte(`{"readOnlyHint":true}`)}
}

func fileCall(ctx *sharedosv1.AccessContext, tool, action, path string) *sharedosv1.AuthorizeRequest {
	p, _ := json.Marshal(path)
	args := `{"path":` + string(p) + `}`
	return &sharedosv1.AuthorizeRequest{
		Context: ctx, Tool: filesTool(tool), Action: action,
		Resource: "file:" + path, ArgumentsJson: []byte(args), CallId: "call-1", TurnId: "turn-1",
	}
}

func TestAuthorizeExamplePolicy(t *testing.T) {
	h := start(t, examplePolicyDir(t))
	tests := []struct {
		name   string
		req    *sharedosv1.AuthorizeRequest
		allow  bool
		reason string // exact when set
	}{
		{"engineer reads public", fileCall(engineer, "files.read", "read", "/public/a.txt"), true, "role engineer may read /public/a.txt"},
		{"engineer searches public", fileCall(engineer, "files.search", "search", "/public"), true, ""},
		{"engineer denied private", fileCall(engineer, "files.read", "read", "/private/a.txt"), false, "role engineer may not read /private/a.txt"},
		{"engineer cannot see write", fileCall(engineer, "files.write", "write", "/public/a.txt"), false, "tool files.write is not available to role engineer"},
		{"admin reads private", fileCall(admin, "files.read", "read", "/private/a.txt"), true, ""},
		{"admin writes private", fileCall(admin, "files.write", "write", "/private/a.txt"), true, ""},
		{"no roles may do nothing", fileCall(nobody, "files.read", "read", "/public/a.txt"), false, "principal has no roles"},
		{"traversal cleaned to private", fileCall(engineer, "files.read", "read", "/public/../private/a.txt"), false, "role engineer may not read /private/a.txt"},
		{"dot and double slash traversal", fileCall(engineer, "files.read", "read", "/public/./..//private/a.txt"), false, "role engineer may not read /private/a.txt"},
		{"traversal stays at root", fileCall(engineer, "files.read", "read", "/../public/a.txt"), true, "role engineer may read /public/a.txt"},
		{"admin traversal cleaned", fileCall(admin, "files.read", "read", "/public/../private/a.txt"), true, "role admin may read /private/a.txt"},
		{"prefix collision", fileCall(engineer, "files.read", "read", "/publicity/a.txt"), false, "role engineer may not read /publicity/a.txt"},
		{"admin prefix collision", fileCall(admin, "files.read", "read", "/privateer/a.txt"), false, ""},
		{"backslash traversal", fileCall(engineer, "files.read", "read", `\public\..\private\a.txt`), false, "role engineer may not read /private/a.txt"},
		{"percent-encoded dots", fileCall(engineer, "files.read", "read", "/public/%2e%2e/private/a.txt"), false, ""},
		{"percent-encoded dots, upper case", fileCall(admin, "files.read", "read", "/public/%2E%2E/x"), false, ""},
		{"fullwidth dots", fileCall(engineer, "files.read", "read", "/public/．．/private"), false, ""},
		{"NUL byte", fileCall(admin, "files.read", "read", "/public/a.txt\x00.png"), false, ""},
		{"relative path", fileCall(admin, "files.read", "read", "private/a.txt"), false, "path refused: it must be absolute"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := h.client.Authorize(context.Background(), tt.req)
			if err != nil {
				t.Fatalf("Authorize: %v", err)
			}
			want := sharedosv1.Decision_DECISION_DENY
			if tt.allow {
				want = sharedosv1.Decision_DECISION_ALLOW
			}
			if resp.GetDecision() != want {
				t.Fatalf("decision = %v (%q), want %v", resp.GetDecision(), resp.GetReason(), want)
			}
			if tt.reason != "" && resp.GetReason() != tt.reason {
				t.Errorf("reason = %q, want %q", resp.GetReason(), tt.reason)
			}
			if resp.GetReason() == "" {
				t.Error("reason is empty")
			}
			if len(resp.GetDecisionId()) != 32 {
				t.Errorf("decision id %q is not 128 bits of hex", resp.GetDecisionId())
			}
			if resp.GetPolicyRevision() != h.completed.Engine().Revision() || !strings.HasPrefix(resp.GetPolicyRevision(), "sha256:") {
				t.Errorf("policy revision = %q, engine has %q", resp.GetPolicyRevision(), h.completed.Engine().Revision())
			}
		})
	}
}

func TestFilterToolsExamplePolicy(t *testing.T) {
	h := start(t, examplePolicyDir(t))
	tools := []*sharedosv1.ToolFacts{filesTool("files.write"), filesTool("github.search"), filesTool("files.search"), filesTool("files.read")}
	tests := []struct {
		name string
		ctx  *sharedosv1.AccessContext
		want []string
	}{
		{"engineer", engineer, []string{"files.search", "files.read"}},
		{"admin", admin, []string{"files.write", "files.search", "files.read"}},
		{"no roles", nobody, []string{}},
		{"engineer and admin", &sharedosv1.AccessContext{Principal: "bob", Roles: []string{"engineer", "admin"}}, []string{"files.write", "files.search", "files.read"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := h.client.FilterTools(context.Background(), &sharedosv1.FilterToolsRequest{Context: tt.ctx, Tools: tools})
			if err != nil {
				t.Fatalf("FilterTools: %v", err)
			}
			got := resp.GetAllowedTools()
			if got == nil {
				got = []string{}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("allowed = %v, want %v (request order)", got, tt.want)
			}
			if resp.GetDecisionId() == "" || resp.GetPolicyRevision() != h.completed.Engine().Revision() {
				t.Errorf("decision id %q / revision %q missing or stale", resp.GetDecisionId(), resp.GetPolicyRevision())
			}
			rec := h.decisions.record(t, resp.GetDecisionId())
			if rec == nil {
				t.Fatalf("no decision record for %s", resp.GetDecisionId())
			}
			if rec["kind"] != "filter_tools" || rec["action"] != "list" || rec["tool_count"] != float64(len(tools)) {
				t.Errorf("record = %v", rec)
			}
		})
	}
}

func TestProbePolicyContract(t *testing.T) {
	// The eval timeout ends probe.slow; every other case must finish within
	// it on a loaded machine, so it is not short.
	h := start(t, filepath.Join("testdata", "probe"), withEvalTimeout(2*time.Second))
	call := func(tool, args string) *sharedosv1.AuthorizeRequest {
		return &sharedosv1.AuthorizeRequest{Context: engineer, Tool: &sharedosv1.ToolFacts{Name: tool}, Action: "call", ArgumentsJson: []byte(args)}
	}
	tests := []struct {
		name   string
		req    *sharedosv1.AuthorizeRequest
		code   codes.Code // OK means a decision is expected
		allow  bool
		reason string
	}{
		{"allow", call("probe.allow", `{}`), codes.OK, true, "probe allow"},
		{"deny", call("probe.deny", `{}`), codes.OK, false, "probe deny"},
		{"undefined is deny", call("probe.undefined", `{}`), codes.OK, false, pdp.NoDecisionReason},
		{"allow not boolean is deny", call("probe.malformed", `{}`), codes.OK, false, pdp.NoDecisionReason},
		{"decision not an object is deny", call("probe.notobject", `{}`), codes.OK, false, pdp.NoDecisionReason},
		{"type error on an argument is an error", call("probe.typeerror", `{"path":42}`), codes.Internal, false, ""},
		{"type error guard passes for a string", call("probe.typeerror", `{"path":"/x"}`), codes.OK, true, "typed"},
		{"conflicting results are an error", call("probe.conflict", `{}`), codes.Internal, false, ""},
		{"timeout is an error", call("probe.slow", `{}`), codes.DeadlineExceeded, false, ""},
		{"big integer keeps its digits", call("probe.bignum", `{"n":12345678901234567890}`), codes.OK, true, "exact"},
		{"an error quoting an argument", call("probe.quote", `{"v":"canary-quote-5150"}`), codes.Internal, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := h.client.Authorize(context.Background(), tt.req)
			if tt.code != codes.OK {
				st := status.Convert(err)
				if err == nil || st.Code() != tt.code {
					t.Fatalf("got %v / %v, want code %v (never a decision)", resp, err, tt.code)
				}
				info := errorInfo(st)
				if info == nil || info.GetReason() != "AUTHZ_EVAL_ERROR" || info.GetMetadata()["decision_id"] == "" {
					t.Fatalf("ErrorInfo = %v, want reason AUTHZ_EVAL_ERROR with a decision id", info)
				}
				rec := h.decisions.record(t, info.GetMetadata()["decision_id"])
				if rec == nil || rec["result"] != "error" || rec["error"] == "" {
					t.Errorf("decision record = %v, want result error with the cause", rec)
				}
				// Invariant 11 (issue 17, item 17): an error that quotes an
				// argument is logged with the value as a digest.
				if e := fmt.Sprint(rec["error"]); strings.Contains(e, "canary-quote-5150") {
					t.Errorf("decision record error quotes the argument: %s", e)
				} else if tt.name == "an error quoting an argument" && !strings.Contains(e, "[arg sha256:") {
					t.Errorf("decision record error %q: want the quoted value as a digest", e)
				}
				return
			}
			if err != nil {
				t.Fatalf("Authorize: %v", err)
			}
			allow := resp.GetDecision() == sharedosv1.Decision_DECISION_ALLOW
			if allow != tt.allow || resp.GetReason() != tt.reason {
				t.Errorf("got allow=%v reason=%q, want allow=%v reason=%q", allow, resp.GetReason(), tt.allow, tt.reason)
			}
		})
	}
}

func errorInfo(st *status.Status) *errdetails.ErrorInfo {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info
		}
	}
	return nil
}

func TestBadInputIsRefusedBeforeEvaluation(t *testing.T) {
	h := start(t, examplePolicyDir(t))
	valid := func() *sharedosv1.AuthorizeRequest { return fileCall(engineer, "files.read", "read", "/public/a.txt") }
	deep := strings.Repeat(`{"a":`, 65) + `1` + strings.Repeat(`}`, 65)
	okDeep := strings.Repeat(`{"a":`, 64) + `1` + strings.Repeat(`}`, 64)
	big := `{"s":"` + strings.Repeat("x", pdp.MaxJSONBytes) + `"}`
	tests := []struct {
		name  string
		mut   func(r *sharedosv1.AuthorizeRequest)
		field string
		rule  string
	}{
		{"unknown action", func(r *sharedosv1.AuthorizeRequest) { r.Action = "delete" }, "action", "must be one of read, write, search, call, execute, get"},
		// list is FilterTools' action: a call authorized by a policy's list
		// rule would skip every resource check (issue 17, item 3).
		{"list is not a call's action", func(r *sharedosv1.AuthorizeRequest) { r.Action = "list" }, "action", `must be one of read, write, search, call, execute, get, got "list"`},
		{"empty action", func(r *sharedosv1.AuthorizeRequest) { r.Action = "" }, "action", "must be one of"},
		{"missing context", func(r *sharedosv1.AuthorizeRequest) { r.Context = nil }, "context", "is required"},
		{"empty principal", func(r *sharedosv1.AuthorizeRequest) { r.Context = &sharedosv1.AccessContext{Roles: []string{"admin"}} }, "context.principal", "must not be empty"},
		{"missing tool", func(r *sharedosv1.AuthorizeRequest) { r.Tool = nil }, "tool", "is required"},
		{"bad tool name", func(r *sharedosv1.AuthorizeRequest) { r.Tool.Name = "files read" }, "tool.name", "ToolNameSchema"},
		{"a prompt under a bad name", func(r *sharedosv1.AuthorizeRequest) { r.Tool.Class = "prompt"; r.Tool.Name = "a prompt" }, "tool.name", "ToolNameSchema"},
		{"a resource URI with a control character", func(r *sharedosv1.AuthorizeRequest) {
			r.Tool.Class, r.Tool.Name = "resource", "test://a\x00b"
		}, "tool.name", "a resource is named by its URI"},
		{"arguments an array", func(r *sharedosv1.AuthorizeRequest) { r.ArgumentsJson = []byte(`[1,2]`) }, "arguments_json", "must be a JSON object"},
		{"arguments a string", func(r *sharedosv1.AuthorizeRequest) { r.ArgumentsJson = []byte(`"x"`) }, "arguments_json", "must be a JSON object"},
		{"arguments not JSON", func(r *sharedosv1.AuthorizeRequest) { r.ArgumentsJson = []byte(`{"a":`) }, "arguments_json", "must be valid JSON"},
		{"arguments with trailing data", func(r *sharedosv1.AuthorizeRequest) { r.ArgumentsJson = []byte(`{} {}`) }, "arguments_json", "must be valid JSON"},
		{"arguments too deep", func(r *sharedosv1.AuthorizeRequest) { r.ArgumentsJson = []byte(deep) }, "arguments_json", "nested at most 64 levels"},
		{"arguments 100k deep", func(r *sharedosv1.AuthorizeRequest) {
			r.ArgumentsJson = []byte(strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000))
		}, "arguments_json", "nested at most 64 levels"},
		{"arguments too large", func(r *sharedosv1.AuthorizeRequest) { r.ArgumentsJson = []byte(big) }, "arguments_json", "at most 1048576 bytes"},
		{"arguments invalid UTF-8", func(r *sharedosv1.AuthorizeRequest) { r.ArgumentsJson = []byte("{\"p\":\"\xff\"}") }, "arguments_json", "valid UTF-8"},
		// 1 MiB of {"x":{}} cost 112 MB to parse (review D5).
		{"arguments of many objects", func(r *sharedosv1.AuthorizeRequest) {
			r.ArgumentsJson = []byte(`{"a":[` + strings.Repeat(`{"x":{}},`, (pdp.MaxJSONBytes-16)/9) + `{}]}`)
		}, "arguments_json", "must hold at most 16384 objects and arrays"},
		{"arguments of many values", func(r *sharedosv1.AuthorizeRequest) {
			r.ArgumentsJson = []byte(`{"a":[` + strings.Repeat(`1,`, pdp.MaxJSONValues) + `1]}`)
		}, "arguments_json", "must hold at most 65536 JSON values"},
		{"annotations not an object", func(r *sharedosv1.AuthorizeRequest) { r.Tool.AnnotationsJson = []byte(`true`) }, "tool.annotations_json", "must be a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := valid()
			tt.mut(req)
			before := len(h.decisions.records(t))
			_, err := h.client.Authorize(context.Background(), req)
			assertInvalid(t, err, tt.field, tt.rule)
			if after := len(h.decisions.records(t)); after != before {
				t.Errorf("a refused request wrote %d decision records", after-before)
			}
		})
	}

	t.Run("64 levels is accepted", func(t *testing.T) {
		req := valid()
		req.ArgumentsJson = []byte(okDeep)
		if _, err := h.client.Authorize(context.Background(), req); err != nil {
			t.Fatalf("Authorize: %v", err)
		}
	})

	filterTests := []struct {
		name  string
		req   *sharedosv1.FilterToolsRequest
		field string
		rule  string
	}{
		{"filter empty principal", &sharedosv1.FilterToolsRequest{Context: &sharedosv1.AccessContext{}, Tools: []*sharedosv1.ToolFacts{filesTool("files.read")}}, "context.principal", "must not be empty"},
		{"filter unknown action", &sharedosv1.FilterToolsRequest{Context: engineer, Action: "see"}, "action", "must be empty (list) or one of"},
		{"filter bad tool name", &sharedosv1.FilterToolsRequest{Context: engineer, Tools: []*sharedosv1.ToolFacts{filesTool("files.read"), {Name: ""}}}, "tools[1].name", "ToolNameSchema"},
		{"filter bad annotations", &sharedosv1.FilterToolsRequest{Context: engineer, Tools: []*sharedosv1.ToolFacts{{Name: "files.read", AnnotationsJson: []byte(`[`)}}}, "tools[0].annotations_json", "must be valid JSON"},
	}
	for _, tt := range filterTests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := h.client.FilterTools(context.Background(), tt.req)
			assertInvalid(t, err, tt.field, tt.rule)
		})
	}
}

func assertInvalid(t *testing.T, err error, field, rule string) {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != codes.InvalidArgument {
		t.Fatalf("err = %v, want InvalidArgument", err)
	}
	if !strings.HasPrefix(st.Message(), field+": ") || !strings.Contains(st.Message(), rule) {
		t.Errorf("message = %q, want field %q and rule containing %q", st.Message(), field, rule)
	}
	var br *errdetails.BadRequest
	for _, d := range st.Details() {
		if b, ok := d.(*errdetails.BadRequest); ok {
			br = b
		}
	}
	if br == nil || len(br.GetFieldViolations()) != 1 || br.GetFieldViolations()[0].GetField() != field {
		t.Errorf("BadRequest detail = %v, want one violation on %q", br, field)
	}
}

func TestDecisionIDsAreUnique(t *testing.T) {
	h := start(t, examplePolicyDir(t))
	seen := map[string]bool{}
	for i := 0; i < 300; i++ {
		resp, err := h.client.Authorize(context.Background(), fileCall(engineer, "files.read", "read", "/public/a.txt"))
		if err != nil {
			t.Fatalf("Authorize: %v", err)
		}
		if seen[resp.GetDecisionId()] {
			t.Fatalf("decision id %s repeated after %d calls", resp.GetDecisionId(), i)
		}
		seen[resp.GetDecisionId()] = true
	}
}

func TestDecisionLogRecord(t *testing.T) {
	h := start(t, examplePolicyDir(t))
	const canary = "canary-7f3a9c-secret-value"
	args := []byte(`{"path":"/public/a.txt","token":"` + canary + `","n":12345678901234567890}`)
	req := fileCall(engineer, "files.read", "read", "/public/a.txt")
	req.ArgumentsJson = args

	ctx, span := otel.Tracer("test").Start(context.Background(), "client")
	resp, err := h.client.Authorize(ctx, req)
	span.End()
	if err != nil {
		t.Fatalf("Authorize: %v", err)
	}
	rec := h.decisions.record(t, resp.GetDecisionId())
	if rec == nil {
		t.Fatalf("no decision record for %s in:\n%s", resp.GetDecisionId(), h.decisions.String())
	}
	sum := sha256.Sum256(args)
	want := map[string]any{
		"msg":             "authz decision",
		"kind":            "authorize",
		"policy_revision": resp.GetPolicyRevision(),
		"principal":       "alice",
		"tenant":          "acme",
		"tool":            "files.read",
		"action":          "read",
		// Argument-derived values are logged as digests (invariant 11).
		"resource":         "file:" + redact.Digest("/public/a.txt"),
		"arguments_digest": "sha256:" + hex.EncodeToString(sum[:]),
		"result":           "allow",
		"reason":           redact.Arguments(resp.GetReason(), args),
		"call_id":          "call-1",
		"turn_id":          "turn-1",
		"trace_id":         span.SpanContext().TraceID().String(),
	}
	for k, v := range want {
		if rec[k] != v {
			t.Errorf("record[%q] = %v, want %v", k, rec[k], v)
		}
	}
	if sid, _ := rec["span_id"].(string); len(sid) != 16 || sid == span.SpanContext().SpanID().String() {
		t.Errorf("span_id = %q, want the server span's id", rec["span_id"])
	}
	if _, ok := rec["duration_us"].(float64); !ok {
		t.Errorf("duration_us missing: %v", rec)
	}
	if strings.Contains(h.decisions.String(), canary) || strings.Contains(h.logs.String(), canary) {
		t.Error("a raw argument value reached the logs")
	}

	deny, err := h.client.Authorize(context.Background(), fileCall(engineer, "files.read", "read", "/private/a.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if r := h.decisions.record(t, deny.GetDecisionId()); r == nil || r["result"] != "deny" ||
		r["reason"] != "role engineer may not read "+redact.Digest("/private/a.txt") || strings.Contains(deny.GetReason(), "[arg") {
		t.Errorf("deny record = %v", r)
	}
}

func TestCancelledRequestIsStillLogged(t *testing.T) {
	h := start(t, filepath.Join("testdata", "probe"))
	seen := len(spans.Started())
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := h.client.Authorize(ctx, &sharedosv1.AuthorizeRequest{
			Context: engineer, Tool: &sharedosv1.ToolFacts{Name: "probe.slow"}, Action: "call",
		})
		errc <- err
	}()
	// Cancel once the server has taken the call (its RPC span has started)
	// and before any record exists (probe.slow does not finish by itself),
	// so the record can only come from the cancelled call.
	waitFor(t, "the server taking the call", func() bool { return serverStarted(seen, "/Authorize") })
	cancel()
	if err := <-errc; status.Code(err) != codes.Canceled {
		t.Fatalf("err = %v, want Canceled", err)
	}
	var rec map[string]any
	waitFor(t, "the cancelled call's decision record", func() bool {
		for _, r := range h.decisions.records(t) {
			if r["tool"] == "probe.slow" {
				rec = r
				return true
			}
		}
		return false
	})
	if rec["result"] != "error" || !strings.Contains(fmt.Sprint(rec["error"]), "cancel") {
		t.Errorf("record = %v, want result error naming the cancellation", rec)
	}
}

func TestHealthAndReflection(t *testing.T) {
	h := start(t, examplePolicyDir(t))
	for _, svc := range []string{"", "liveness", "sharedos.v1.AuthzService"} {
		resp, err := h.health.Check(context.Background(), &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health %q = %v, %v; want SERVING", svc, resp, err)
		}
	}
	stream, err := reflectionpb.NewServerReflectionClient(h.conn).ServerReflectionInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{
		MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{},
	}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	_ = stream.CloseSend()
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	if !slices.Contains(names, "sharedos.v1.AuthzService") {
		t.Errorf("reflection lists %v, want sharedos.v1.AuthzService", names)
	}
}

func TestReloadGoodAndBroken(t *testing.T) {
	dir := copyPolicyDir(t)
	h := start(t, dir)
	engine := h.completed.Engine()
	rev0 := engine.Revision()
	visible := func() []string {
		resp, err := h.client.FilterTools(context.Background(), &sharedosv1.FilterToolsRequest{
			Context: engineer, Tools: []*sharedosv1.ToolFacts{filesTool("files.read"), filesTool("files.search"), filesTool("files.write")},
		})
		if err != nil {
			t.Fatalf("FilterTools: %v", err)
		}
		if resp.GetPolicyRevision() == "" {
			t.Fatal("no policy revision")
		}
		return resp.GetAllowedTools()
	}
	if got := visible(); !slices.Equal(got, []string{"files.read", "files.search"}) {
		t.Fatalf("before reload engineer sees %v", got)
	}

	// A good change: engineer loses files.search.
	writeFile(t, filepath.Join(dir, "data.json"), `{"sharedos":{"roles":{"engineer":{"tools":["files.read"],"grants":{"read":["/public"]}}}}}`)
	waitFor(t, "the good reload", func() bool { return engine.Revision() != rev0 })
	rev1 := engine.Revision()
	if err := engine.LastReloadError(); err != nil {
		t.Fatalf("LastReloadError after a good reload: %v", err)
	}
	if got := visible(); !slices.Equal(got, []string{"files.read"}) {
		t.Fatalf("after reload engineer sees %v", got)
	}

	// A broken change: the previous policy keeps serving.
	writeFile(t, filepath.Join(dir, "sharedos", "broken.rego"), "package sharedos.authz\n\nthis is not rego {\n")
	waitFor(t, "the failed reload", func() bool { return engine.LastReloadError() != nil })
	if engine.Revision() != rev1 {
		t.Fatalf("revision moved to %s after a failed reload", engine.Revision())
	}
	if got := visible(); !slices.Equal(got, []string{"files.read"}) {
		t.Fatalf("after a failed reload engineer sees %v", got)
	}
	if n := reloadFailures(t, h); n < 1 {
		t.Errorf("sharedos.policy.reload.failures = %d, want ≥ 1", n)
	}
	if !strings.Contains(h.logs.String(), "policy reload failed") {
		t.Error("the failed reload was not logged")
	}
	for _, svc := range []string{"", "liveness", "sharedos.v1.AuthzService"} {
		resp, err := h.health.Check(context.Background(), &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health %q after failed reload = %v, %v; want SERVING", svc, resp, err)
		}
	}

	// Manual Reload reports the same failure; fixing the file recovers.
	if err := engine.Reload(context.Background()); err == nil {
		t.Fatal("Reload of a broken policy returned nil")
	}
	writeFile(t, filepath.Join(dir, "sharedos", "broken.rego"), "package sharedos.extra\n\nimport rego.v1\n\nok := true\n")
	waitFor(t, "the recovering reload", func() bool { return engine.LastReloadError() == nil && engine.Revision() != rev1 })
	if got := visible(); !slices.Equal(got, []string{"files.read"}) {
		t.Fatalf("after recovery engineer sees %v", got)
	}
}

func reloadFailures(t *testing.T, h *harness) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := h.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "sharedos.policy.reload.failures" {
				continue
			}
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok {
				var n int64
				for _, dp := range sum.DataPoints {
					n += dp.Value
				}
				return n
			}
		}
	}
	return 0
}

func TestRevisionIgnoresTests(t *testing.T) {
	dir := copyPolicyDir(t)
	h := start(t, dir)
	engine := h.completed.Engine()
	rev0 := engine.Revision()
	writeFile(t, filepath.Join(dir, "sharedos", "extra_test.rego"), "package sharedos.extra_test\n\nimport rego.v1\n\ntest_x if true\n")
	if err := engine.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if engine.Revision() != rev0 {
		t.Errorf("adding a *_test.rego changed the revision")
	}
}

func TestBigIntegerReachesExamplePolicyIntact(t *testing.T) {
	// The example policy ignores n, so this only checks the request is
	// accepted and digested over the exact bytes; the probe policy test
	// above checks the value Rego sees.
	h := start(t, examplePolicyDir(t))
	req := fileCall(engineer, "files.read", "read", "/public/a.txt")
	req.ArgumentsJson = []byte(`{"path":"/public/a.txt","n":12345678901234567890}`)
	resp, err := h.client.Authorize(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(req.ArgumentsJson)
	if rec := h.decisions.record(t, resp.GetDecisionId()); rec["arguments_digest"] != "sha256:"+hex.EncodeToString(sum[:]) {
		t.Errorf("digest = %v", rec["arguments_digest"])
	}
}

// The client's deadline reaches the evaluation: probe.slow never finishes and
// the harness's eval timeout is 5 s, so a DeadlineExceeded well before that
// is the client's 200 ms. (Whether the client's or the server's timer fires
// first is a race; either way the code is DeadlineExceeded.)
func TestDeadlineFromClient(t *testing.T) {
	h := start(t, filepath.Join("testdata", "probe"))
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := h.client.Authorize(ctx, &sharedosv1.AuthorizeRequest{Context: engineer, Tool: &sharedosv1.ToolFacts{Name: "probe.slow"}, Action: "call"})
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
	if d := time.Since(start); d >= 5*time.Second {
		t.Fatalf("answered after %s: the eval timeout, not the client's deadline, ended it", d)
	}
}

func TestFilterToolsWithoutVisibleRuleDecidesPerTool(t *testing.T) {
	// The probe policy defines no visible rule, so FilterTools falls back to
	// one decision per tool; an eval error on any tool fails the whole call.
	h := start(t, filepath.Join("testdata", "probe"))
	tools := []*sharedosv1.ToolFacts{{Name: "probe.deny"}, {Name: "probe.allow"}, {Name: "probe.undefined"}, {Name: "probe.malformed"}}
	resp, err := h.client.FilterTools(context.Background(), &sharedosv1.FilterToolsRequest{Context: engineer, Tools: tools})
	if err != nil {
		t.Fatalf("FilterTools: %v", err)
	}
	if got := resp.GetAllowedTools(); !slices.Equal(got, []string{"probe.allow"}) {
		t.Errorf("allowed = %v, want [probe.allow]", got)
	}
	_, err = h.client.FilterTools(context.Background(), &sharedosv1.FilterToolsRequest{
		Context: engineer, Tools: []*sharedosv1.ToolFacts{{Name: "probe.allow"}, {Name: "probe.conflict"}},
	})
	if status.Code(err) != codes.Internal {
		t.Errorf("err = %v, want Internal (an eval error is never a filtered-out tool)", err)
	}
}

// TestPromptsAndResourcesExamplePolicy (ADR 0018): a prompt is got and a
// resource read by the role that may list it; FilterTools lists prompt and
// resource entries (a resource by its registration's URI template) next to
// tools in one decision.
func TestPromptsAndResourcesExamplePolicy(t *testing.T) {
	h := start(t, examplePolicyDir(t))
	ctx := context.Background()
	runner := &sharedosv1.AccessContext{Principal: "ci", Tenant: "acme", Roles: []string{"conformance"}}
	tmpl := &sharedosv1.ToolFacts{Name: "test://template/{id}/data", Class: "resource", Source: "provider:conformance"}
	prompt := &sharedosv1.ToolFacts{Name: "test_simple_prompt", Class: "prompt", Source: "provider:conformance"}
	for _, c := range []struct {
		req   *sharedosv1.AuthorizeRequest
		allow bool
	}{
		{&sharedosv1.AuthorizeRequest{Context: runner, Tool: tmpl, Action: "read", Resource: "resource:test://template/7/data"}, true},
		{&sharedosv1.AuthorizeRequest{Context: runner, Tool: prompt, Action: "get", Resource: "prompt:test_simple_prompt", ArgumentsJson: []byte(`{"a":"b"}`)}, true},
		{&sharedosv1.AuthorizeRequest{Context: runner, Tool: prompt, Action: "read", Resource: "prompt:test_simple_prompt"}, false},
		{&sharedosv1.AuthorizeRequest{Context: engineer, Tool: prompt, Action: "get", Resource: "prompt:test_simple_prompt"}, false},
	} {
		resp, err := h.client.Authorize(ctx, c.req)
		if err != nil || (resp.GetDecision() == sharedosv1.Decision_DECISION_ALLOW) != c.allow {
			t.Errorf("%s %s as %v: %v, %v; want allow=%v", c.req.GetAction(), c.req.GetResource(), c.req.GetContext().GetRoles(), resp, err, c.allow)
		}
	}
	resp, err := h.client.FilterTools(ctx, &sharedosv1.FilterToolsRequest{Context: runner, Tools: []*sharedosv1.ToolFacts{
		prompt, tmpl, {Name: "test://nope", Class: "resource"}, {Name: "test_simple_text", Class: "managed"},
	}})
	if err != nil || strings.Join(resp.GetAllowedTools(), ",") != "test_simple_prompt,test://template/{id}/data,test_simple_text" {
		t.Fatalf("FilterTools = %v, %v", resp.GetAllowedTools(), err)
	}
}

// A policy watch that cannot be set up, or whose directory goes away,
// stops the service (Run returns its error; nothing cancelled it): a
// policy change would never apply, and the service would go on deciding
// on a policy that no longer follows its directory.
func TestFailedWatchStopsTheService(t *testing.T) {
	for _, when := range []string{"before the watch", "while watching"} {
		t.Run(when, func(t *testing.T) {
			dir := copyPolicyDir(t)
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			logs := &syncBuffer{}
			cfg := app.Config{PolicyDir: dir, EvalTimeout: 5 * time.Second, Watch: true, Listener: lis,
				Logger: slog.New(slog.NewJSONHandler(logs, nil)), DecisionLog: slog.NewJSONHandler(io.Discard, nil)}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			c, err := cfg.Complete(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if when == "before the watch" {
				if err := os.RemoveAll(dir); err != nil {
					t.Fatal(err)
				}
			}
			done := make(chan error, 1)
			go func() { done <- c.Run(ctx) }()
			if when == "while watching" {
				// The watch is on once a change reloads the policy: a change
				// made before it was set up is not seen, so change again —
				// well after the reload's debounce, which each change
				// restarts — until one is.
				rev := c.Engine().Revision()
				deadline := time.Now().Add(30 * time.Second) // only turns a hang into a failure
				for i := 0; c.Engine().Revision() == rev; i++ {
					if time.Now().After(deadline) {
						t.Fatal("no change was ever reloaded")
					}
					policy := fmt.Sprintf("package sharedos.extra\n\nx := %d\n", i)
					if err := os.WriteFile(filepath.Join(dir, "extra.rego"), []byte(policy), 0o644); err != nil {
						t.Fatal(err)
					}
					for wait := time.Now().Add(10 * pdp.ReloadDebounce); c.Engine().Revision() == rev && time.Now().Before(wait); {
						time.Sleep(10 * time.Millisecond)
					}
				}
				if err := os.RemoveAll(dir); err != nil {
					t.Fatal(err)
				}
			}
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), "watch") {
					t.Fatalf("Run = %v, want the watch's error", err)
				}
			case <-time.After(30 * time.Second): // only turns a hang into a failure
				t.Fatal("the service kept serving without its policy watch")
			}
			if !strings.Contains(logs.String(), "policy watch failed; stopping") {
				t.Fatalf("logs %s: want the stop said", logs.String())
			}
		})
	}
}

// A metrics address that cannot be served ends Run with its error and
// closes what Complete opened: the service's listener no longer accepts
// (review: it, the gRPC server and the decision log's sink were left open).
func TestRunClosesWhatItOpenedWhenMetricsFail(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := app.Config{PolicyDir: examplePolicyDir(t), EvalTimeout: time.Second, Listener: lis,
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), DecisionLog: slog.NewJSONHandler(io.Discard, nil),
		MetricsListen: taken.Addr().String(), Metrics: http.NotFoundHandler()}
	c, err := cfg.Complete(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Run(t.Context()); err == nil {
		t.Fatal("Run served with its metrics address taken")
	}
	if conn, err := net.Dial("tcp", lis.Addr().String()); err == nil {
		conn.Close()
		t.Error("the service's listener still accepts after Run failed")
	}
}
