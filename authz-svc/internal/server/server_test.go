package server_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sharedos/toolshare/authz-svc/internal/decisionlog"
	"github.com/sharedos/toolshare/authz-svc/internal/pdp"
	"github.com/sharedos/toolshare/authz-svc/internal/server"
	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/accesscontext/accesscontexttest"
	"github.com/sharedos/toolshare/services/contract/outcome"
	"github.com/sharedos/toolshare/services/platform/grpcx"
)

// fakeDecider answers from fixed functions and counts its calls.
type fakeDecider struct {
	decide func(pdp.Request) (pdp.Decision, error)
	tools  func([]pdp.Tool) ([]pdp.Decision, error)
	calls  int
}

func (f *fakeDecider) Decide(_ context.Context, req pdp.Request) (pdp.Decision, string, error) {
	f.calls++
	d, err := f.decide(req)
	return d, "sha256:rev", err
}

func (f *fakeDecider) DecideTools(_ context.Context, _ pdp.Context, _ string, tools []pdp.Tool) ([]pdp.Decision, string, error) {
	f.calls++
	ds, err := f.tools(tools)
	return ds, "sha256:rev", err
}

// records keeps every decision record written.
type records struct {
	mu  sync.Mutex
	all []decisionlog.Record
}

func (r *records) Write(_ context.Context, rec decisionlog.Record) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.all = append(r.all, rec)
}

func authorizeReq(action, args string) *sharedosv1.AuthorizeRequest {
	return &sharedosv1.AuthorizeRequest{
		Context:       &sharedosv1.AccessContext{Principal: "alice", Tenant: "acme", Roles: []string{"engineer"}},
		Tool:          &sharedosv1.ToolFacts{Name: "files.read", Namespace: "files", Class: "managed"},
		Action:        action,
		Resource:      "file:/public/secret-name.txt",
		ArgumentsJson: []byte(args),
		CallId:        "call-1",
		TurnId:        "turn-1",
	}
}

// An allowed call answers ALLOW with the decision id and revision, and
// leaves exactly one decision record whose argument-derived parts are
// digests.
func TestAuthorizeAllowsAndRecords(t *testing.T) {
	d := &fakeDecider{decide: func(req pdp.Request) (pdp.Decision, error) {
		if req.Action != "read" || req.Resource != "file:/public/secret-name.txt" || req.Context.Principal != "alice" {
			return pdp.Decision{}, fmt.Errorf("unexpected request %+v", req)
		}
		return pdp.Decision{Allow: true, Reason: "role engineer may read it"}, nil
	}}
	log := &records{}
	resp, err := server.New(d, log).Authorize(context.Background(), authorizeReq("read", `{"path":"/public/secret-name.txt"}`))
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetDecision() != sharedosv1.Decision_DECISION_ALLOW || resp.GetDecisionId() == "" || resp.GetPolicyRevision() != "sha256:rev" {
		t.Errorf("response %v", resp)
	}
	if len(log.all) != 1 {
		t.Fatalf("decision records = %d, want 1", len(log.all))
	}
	rec := log.all[0]
	if rec.Result != decisionlog.ResultAllow || rec.DecisionID != resp.GetDecisionId() || rec.CallID != "call-1" || rec.TurnID != "turn-1" {
		t.Errorf("record %+v", rec)
	}
	if strings.Contains(rec.Resource, "secret-name") || !strings.HasPrefix(rec.ArgumentsDigest, "sha256:") {
		t.Errorf("the record keeps an argument value: resource %q, digest %q", rec.Resource, rec.ArgumentsDigest)
	}
}

// A key of the arguments can carry data (a path used as a key): the record
// redacts keys like values, at any depth, and keeps the rest of the text.
func TestAuthorizeRecordRedactsArgumentKeys(t *testing.T) {
	d := &fakeDecider{decide: func(pdp.Request) (pdp.Decision, error) {
		return pdp.Decision{Reason: "role engineer may not write /private/key-canary.txt"}, nil
	}}
	log := &records{}
	req := authorizeReq("write", `{"files":[{"/private/key-canary.txt":"x"}]}`)
	req.Resource = "file:/private/key-canary.txt"
	if _, err := server.New(d, log).Authorize(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	rec := log.all[0]
	if strings.Contains(rec.Resource, "key-canary") || strings.Contains(rec.Reason, "key-canary") {
		t.Errorf("the record keeps an argument key: resource %q, reason %q", rec.Resource, rec.Reason)
	}
	if !strings.HasPrefix(rec.Resource, "file:[arg sha256:") || !strings.HasPrefix(rec.Reason, "role engineer may not write [arg sha256:") {
		t.Errorf("the record lost more than the key: resource %q, reason %q", rec.Resource, rec.Reason)
	}
}

// A resources/read (ADR 0018) names the URI the model chose in its
// resource, with no arguments: the record keeps the URI only as a digest,
// in the resource and in a reason quoting it; the registration's name stays.
func TestAuthorizeRecordRedactsReadURI(t *testing.T) {
	const uri = "test://template/uri-canary-7/data"
	d := &fakeDecider{decide: func(pdp.Request) (pdp.Decision, error) {
		return pdp.Decision{Reason: "role engineer may not read " + uri}, nil
	}}
	log := &records{}
	req := authorizeReq("read", "")
	req.Tool = &sharedosv1.ToolFacts{Name: "test://template/{id}/data", Class: "resource"}
	req.Resource = "resource:" + uri
	if _, err := server.New(d, log).Authorize(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	rec := log.all[0]
	if strings.Contains(rec.Resource, "uri-canary") || strings.Contains(rec.Reason, "uri-canary") {
		t.Errorf("the record keeps the URI: resource %q, reason %q", rec.Resource, rec.Reason)
	}
	if !strings.HasPrefix(rec.Resource, "resource:[arg sha256:") || !strings.HasPrefix(rec.Reason, "role engineer may not read [arg") ||
		rec.Tool != "test://template/{id}/data" {
		t.Errorf("record %+v", rec)
	}
}

// Arguments of very many values (1 MiB of ~130,000 short strings) are not
// collected value by value for the record, which took up to a second per
// call outside the evaluation's deadline: the record's texts are replaced
// whole (redact.MaxValues), the model's reason stays as the policy wrote it.
func TestAuthorizeRecordOfManyValuesRedactsWhole(t *testing.T) {
	const reason = "role engineer may read /public/secret-name.txt"
	d := &fakeDecider{decide: func(pdp.Request) (pdp.Decision, error) {
		return pdp.Decision{Allow: true, Reason: reason}, nil
	}}
	var args strings.Builder
	args.WriteString(`{"path":"/public/secret-name.txt","x":[`)
	// As many values as authz-svc takes (the object, path and array are
	// three), in close to its 1 MiB.
	for i := 0; args.Len() < pdp.MaxJSONBytes-64 && i < pdp.MaxJSONValues-3; i++ {
		if i > 0 {
			args.WriteByte(',')
		}
		fmt.Fprintf(&args, `"v%05d-pad%03d"`, i, i%1000)
	}
	args.WriteString(`]}`)
	log := &records{}
	resp, err := server.New(d, log).Authorize(context.Background(), authorizeReq("read", args.String()))
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetReason() != reason {
		t.Errorf("the model's reason = %q, want %q", resp.GetReason(), reason)
	}
	rec := log.all[0]
	for name, text := range map[string]string{"resource": rec.Resource, "reason": rec.Reason} {
		if !strings.HasPrefix(text, "[text of ") || !strings.Contains(text, "redacted whole") {
			t.Errorf("record %s = %q, want it redacted whole", name, text)
		}
	}
}

// A request that breaks a rule is InvalidArgument naming the field, is
// never evaluated, and writes no decision record.
func TestAuthorizeRefusesBadRequests(t *testing.T) {
	cases := []struct {
		name  string
		req   *sharedosv1.AuthorizeRequest
		field string
	}{
		{"list is not a call", authorizeReq("list", `{}`), "action"},
		{"unknown action", authorizeReq("delete", `{}`), "action"},
		{"arguments not an object", authorizeReq("read", `[1]`), "arguments_json"},
		{"arguments not UTF-8", authorizeReq("read", "{\"path\":\"\xff\"}"), "arguments_json"},
		{"arguments repeat a key", authorizeReq("read", `{"path":"/public/a","path":"/private/b"}`), "arguments_json"},
		{"no principal", func() *sharedosv1.AuthorizeRequest {
			r := authorizeReq("read", `{}`)
			r.Context.Principal = ""
			return r
		}(), "context.principal"},
		{"no tool", func() *sharedosv1.AuthorizeRequest { r := authorizeReq("read", `{}`); r.Tool = nil; return r }(), "tool"},
		{"resource too long", func() *sharedosv1.AuthorizeRequest {
			r := authorizeReq("read", `{}`)
			r.Resource = "file:/" + strings.Repeat("a", server.MaxResourceBytes)
			return r
		}(), "resource"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := &fakeDecider{decide: func(pdp.Request) (pdp.Decision, error) { return pdp.Decision{Allow: true}, nil }}
			log := &records{}
			_, err := server.New(d, log).Authorize(context.Background(), tc.req)
			if got := status.Code(err); got != codes.InvalidArgument {
				t.Fatalf("code %v (%v), want InvalidArgument", got, err)
			}
			if f := violatedField(err); f != tc.field {
				t.Errorf("field violation %q, want %q (%v)", f, tc.field, err)
			}
			if d.calls != 0 || len(log.all) != 0 {
				t.Errorf("refused request evaluated %d times, %d records", d.calls, len(log.all))
			}
		})
	}
}

// An evaluation that produces no decision is never a deny: the caller gets
// a fixed message with the decision id (DeadlineExceeded for a timeout),
// the record keeps the error with argument values redacted.
func TestAuthorizeEvalErrorIsNoDecision(t *testing.T) {
	for _, tc := range []struct {
		cause error
		code  codes.Code
	}{
		{errors.New("builtin failed on /public/secret-name.txt"), codes.Internal},
		{context.DeadlineExceeded, codes.DeadlineExceeded},
	} {
		d := &fakeDecider{decide: func(pdp.Request) (pdp.Decision, error) { return pdp.Decision{}, &pdp.EvalError{Err: tc.cause} }}
		log := &records{}
		_, err := server.New(d, log).Authorize(context.Background(), authorizeReq("read", `{"path":"/public/secret-name.txt"}`))
		if got := status.Code(err); got != tc.code {
			t.Errorf("%v: code %v, want %v", tc.cause, got, tc.code)
		}
		// What the kernel reads to record authz_error whatever the code.
		if domain, reason := grpcx.ErrorReason(err); domain != outcome.ErrorDomainAuthz || reason != outcome.ReasonAuthzEvalError {
			t.Errorf("%v: ErrorInfo %s/%s, want %s/%s", tc.cause, domain, reason, outcome.ErrorDomainAuthz, outcome.ReasonAuthzEvalError)
		}
		if strings.Contains(status.Convert(err).Message(), "secret-name") {
			t.Errorf("the caller sees the evaluation error: %v", err)
		}
		if len(log.all) != 1 || log.all[0].Result != decisionlog.ResultError || strings.Contains(log.all[0].Error, "secret-name") {
			t.Errorf("%v: records %+v", tc.cause, log.all)
		}
	}
}

// FilterTools keeps request order, shares one decision id and record, and
// refuses a tool without a valid name before evaluating anything.
func TestFilterTools(t *testing.T) {
	d := &fakeDecider{tools: func(tools []pdp.Tool) ([]pdp.Decision, error) {
		out := make([]pdp.Decision, len(tools))
		for i, t := range tools {
			out[i].Allow = t.Name != "files.write"
		}
		return out, nil
	}}
	log := &records{}
	s := server.New(d, log)
	in := &sharedosv1.FilterToolsRequest{
		Context: &sharedosv1.AccessContext{Principal: "alice", Roles: []string{"engineer"}},
		Tools: []*sharedosv1.ToolFacts{
			{Name: "files.search", Class: "managed"},
			{Name: "files.write", Class: "managed"},
			{Name: "files.read", Class: "managed"},
		},
	}
	resp, err := s.FilterTools(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(resp.GetAllowedTools(), []string{"files.search", "files.read"}) || resp.GetDecisionId() == "" {
		t.Errorf("response %v", resp)
	}
	if len(log.all) != 1 || log.all[0].ToolCount != 3 || log.all[0].Kind != decisionlog.KindFilterTools {
		t.Errorf("records %+v", log.all)
	}
	in.Tools = append(in.Tools, &sharedosv1.ToolFacts{Name: "not a name", Class: "managed"})
	calls := d.calls
	if _, err := s.FilterTools(context.Background(), in); status.Code(err) != codes.InvalidArgument || violatedField(err) != "tools[3].name" || d.calls != calls {
		t.Errorf("bad tool name: %v (field %q), evaluated %d more times", err, violatedField(err), d.calls-calls)
	}
}

// violatedField is the field of err's BadRequest detail ("" when none).
func violatedField(err error) string {
	for _, d := range status.Convert(err).Details() {
		if br, ok := d.(*errdetails.BadRequest); ok && len(br.GetFieldViolations()) > 0 {
			return br.GetFieldViolations()[0].GetField()
		}
	}
	return ""
}

// A policy's reason or an evaluation error may quote a piece of an
// argument (a path's last segment; what a built-in could not parse of a
// value): the record keeps no piece of it either (invariant 11).
func TestAuthorizeRecordRedactsPiecesOfArguments(t *testing.T) {
	for name, c := range map[string]struct{ policy, args, canary string }{
		"a reason quoting a path's last segment": {`parts := split(input.file.path, "/")

decision := {"allow": false, "reason": sprintf("%s may not be read", [parts[count(parts) - 1]])}`,
			`{"path":"/private/tok-S3CR3TVALUE"}`, "S3CR3T"},
		"an error quoting what a built-in could not parse": {`decision := {"allow": true, "reason": ""} if time.parse_rfc3339_ns(input.arguments.when) > 0`,
			`{"when":"2024-01-01Tapi_key_ABCDEF0123456789"}`, "ABCDEF"},
		"an error quoting the rest of a value cut inside a word": {`decision := {"allow": true, "reason": ""} if time.parse_rfc3339_ns(input.arguments.when) > 0`,
			`{"when":"2024-01-01TS3CR3TTOKEN99"}`, "S3CR3T"},
	} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "p.rego"), []byte("package sharedos.authz\n\nimport rego.v1\n\n"+c.policy+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		e, err := pdp.New(context.Background(), pdp.Options{Dir: dir, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		log := &records{}
		req := authorizeReq("read", c.args)
		req.Resource = "file:/private/tok-S3CR3TVALUE"
		_, _ = server.New(e, log).Authorize(context.Background(), req)
		if len(log.all) != 1 {
			t.Fatalf("%s: %d records", name, len(log.all))
		}
		rec := log.all[0]
		if text := rec.Reason + rec.Error; strings.Contains(text, c.canary) || !strings.Contains(text, "[arg sha256:") {
			t.Errorf("%s: reason %q, error %q", name, rec.Reason, rec.Error)
		}
	}
}

// authz-svc refuses a context by the rules every entry point checks
// (accesscontext.Check), control and format characters included, before
// any evaluation.
func TestContextRulesAreAccessContexts(t *testing.T) {
	for _, c := range accesscontexttest.Bad() {
		t.Run(c.Name, func(t *testing.T) {
			d := &fakeDecider{decide: func(pdp.Request) (pdp.Decision, error) { return pdp.Decision{Allow: true}, nil }}
			s := server.New(d, &records{})
			req := authorizeReq("read", `{}`)
			req.Context = &sharedosv1.AccessContext{Principal: "p", Tenant: "acme", Roles: []string{"engineer"}, Attributes: map[string]string{"k": "v"}}
			c.Edit(req.Context)
			_, err := s.Authorize(context.Background(), req)
			_, ferr := s.FilterTools(context.Background(), &sharedosv1.FilterToolsRequest{Context: req.Context,
				Tools: []*sharedosv1.ToolFacts{{Name: "files.read"}}})
			for _, err := range []error{err, ferr} {
				if status.Code(err) != codes.InvalidArgument || violatedField(err) != c.Field || !strings.Contains(err.Error(), c.Rule) {
					t.Errorf("= %v, want InvalidArgument on %s: …%s…", err, c.Field, c.Rule)
				}
			}
			if d.calls != 0 {
				t.Errorf("evaluated %d times", d.calls)
			}
		})
	}
}
