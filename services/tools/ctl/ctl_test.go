package ctl

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"

	"github.com/sharedos/toolshare/services/contract/callers"
	"github.com/sharedos/toolshare/services/platform/grpcx"
	"github.com/sharedos/toolshare/services/platform/mtls"
	"github.com/sharedos/toolshare/services/platform/mtls/pki"
	"github.com/sharedos/toolshare/services/tools/devstack"
)

// run runs sharedosctl against the in-process plaintext fakes of these
// tests (the mutual TLS of the plane is the system tests' and mtls's).
func run(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var o, e bytes.Buffer
	code = Main(append([]string{"--insecure-plaintext"}, args...), &o, &e)
	return o.String(), e.String(), code
}

func TestUnknownCommandIsAUsageError(t *testing.T) {
	_, stderr, code := run(t, "tools", "frobnicate")
	if code != 2 || !strings.Contains(stderr, `unknown command "tools frobnicate"`) {
		t.Fatalf("code %d stderr %q", code, stderr)
	}
}

func TestMissingRequiredFlags(t *testing.T) {
	for _, args := range [][]string{
		{"tools", "register"},
		{"turn", "open"},
		{"ops", "list"},
		{"ops", "export"},
		{"ops", "export", "--since", "yesterday"},
		{"authz", "check", "--principal", "alice"},
		{"tools", "get"},
		{"tools", "list", "--role", "engineer"},
		{"turn", "open", "--principal", "a", "--mcp-support", "telepathy"},
	} {
		if _, stderr, code := run(t, args...); code != 2 || stderr == "" {
			t.Errorf("%v: code %d, stderr %q; want usage error 2", args, code, stderr)
		}
	}
}

func TestBadOutputFormat(t *testing.T) {
	if _, _, code := run(t, "--output", "yaml", "status"); code != 2 {
		t.Fatalf("code %d", code)
	}
}

func TestInterleaveMovesFlagsFirst(t *testing.T) {
	g := &globals{}
	fs := newFS(g)
	got := interleave(fs, []string{"NAME", "--output", "table", "--timeout=3s"})
	want := []string{"--output", "table", "--timeout=3s", "NAME"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("got %v want %v", got, want)
	}
}

// TestStatus runs status against one healthy and one unreachable service.
func TestStatus(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	hs := health.NewServer()
	grpc_health_v1.RegisterHealthServer(srv, hs)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close()

	// make run's local CA above the working directory is only a default:
	// --insecure-plaintext still calls in plaintext.
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, devstack.PKIDir), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, devstack.PKIDir, "ca.crt"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)

	ok := lis.Addr().String()
	stdout, _, code := run(t, "--catalog", ok, "--authz", ok, "--bridge", ok, "--files", ok, "--timeout", "5s", "status")
	if code != 0 {
		t.Fatalf("all serving: code %d\n%s", code, stdout)
	}
	var res struct {
		OK       bool
		Services []serviceStatus
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || !res.OK || len(res.Services) != 4 {
		t.Fatalf("status JSON %q (%v)", stdout, err)
	}

	_, stderr, code := run(t, "--catalog", ok, "--authz", deadAddr, "--bridge", ok, "--files", "", "status")
	if code != 1 || !strings.Contains(stderr, "not serving: authz") {
		t.Fatalf("authz down: code %d stderr %q", code, stderr)
	}

	hs.SetServingStatus("", grpc_health_v1.HealthCheckResponse_NOT_SERVING)
	_, stderr, code = run(t, "--catalog", ok, "--authz", ok, "--bridge", ok, "--files", "", "status")
	if code != 1 || !strings.Contains(stderr, "catalog, authz, bridge") {
		t.Fatalf("NOT_SERVING: code %d stderr %q", code, stderr)
	}
}

func TestFieldRowsKeepOrderAndNest(t *testing.T) {
	h, rows, err := fieldRows(json.RawMessage(`{"b":"x","a":{"n":1},"c":[1,2]}`))
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(h, rows)
	if got != `[FIELD VALUE] [[b x] [a {"n":1}] [c [1,2]]]` {
		t.Fatalf("got %s", got)
	}
}

func TestParseSince(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"2026-11-30T08:00:00Z": time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC),
		"24h":                  now.Add(-24 * time.Hour),
		"0s":                   now,
	} {
		if got, err := parseSince(in, now); err != nil || !got.Equal(want) {
			t.Errorf("parseSince(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1h", "last week"} {
		if _, err := parseSince(in, now); err == nil {
			t.Errorf("parseSince(%q) accepted", in)
		}
	}
}

// providers add: the command line splits like a shell's, requirements come
// from flags and a file, and a malformed one is a usage error.
func TestProvidersAddSpec(t *testing.T) {
	file := filepath.Join(t.TempDir(), "reqs.yaml")
	if err := os.WriteFile(file, []byte("fs.list_directory: search:file:{path}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := addFlags{namespace: "fs", command: `npx -y "@modelcontextprotocol/server-filesystem" '/tmp/a dir'`, refresh: 10 * time.Minute,
		headers: kvFlag{"X-Key": "env:KEY"}, requirements: multiFlag{"fs.read_text_file=read:file:{path}"}, requirementsFile: file}
	spec, err := f.spec()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(spec.GetCommand(), "|"); got != "npx|-y|@modelcontextprotocol/server-filesystem|/tmp/a dir" {
		t.Errorf("argv %s", got)
	}
	if r := spec.GetRequirements()["fs.read_text_file"]; r.GetAction() != "read" || r.GetResource() != "file:{path}" {
		t.Errorf("flag requirement %v", r)
	}
	if r := spec.GetRequirements()["fs.list_directory"]; r.GetAction() != "search" || r.GetResource() != "file:{path}" {
		t.Errorf("file requirement %v", r)
	}
	o := addFlags{namespace: "gh", url: "https://mcp.example.com/mcp", oauthTokenURL: "https://auth.example.com/token",
		oauthClientID: "sharedos", oauthSecretRef: "file:/etc/s", oauthScopes: multiFlag{"a", "b"}}
	oauthSpec, err := o.spec()
	if err != nil || oauthSpec.GetOauth().GetClientSecretRef() != "file:/etc/s" || len(oauthSpec.GetOauth().GetScopes()) != 2 {
		t.Errorf("oauth spec %v, %v", oauthSpec, err)
	}
	if spec.GetRefresh().AsDuration() != 10*time.Minute || spec.GetHeaders()["X-Key"] != "env:KEY" {
		t.Errorf("spec %v", spec)
	}
	for _, bad := range []addFlags{
		{namespace: "fs"},
		{namespace: "fs", url: "http://x", command: "y"},
		{url: "http://x"},
		{namespace: "fs", url: "http://x", requirements: multiFlag{"fs.x=read"}},
		{namespace: "fs", url: "http://x", requirements: multiFlag{"noequals"}},
		{namespace: "fs", url: "http://x", refresh: -5 * time.Minute},
		{namespace: "fs", url: "http://x", timeout: -time.Second},
	} {
		if _, err := bad.spec(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// A table cell never carries a terminal escape, a raw tab or newline, a
// bidirectional override or a byte that is not UTF-8: text an upstream
// server, a model or a policy chose is shown, not obeyed.
func TestTableCellsAreInert(t *testing.T) {
	var out bytes.Buffer
	e := &env{stdout: &out, g: &globals{output: "table"}}
	hostile := "read\x1b]52;c;ZXZpbA==\x07\x1b[2J\tx\ny\r\u202egnp.exe\u200b\u009b31m\xff"
	if err := e.emit(nil, []string{"NAME", "REASON"}, [][]string{{hostile, "ok"}}); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	if lines := strings.Count(got, "\n"); lines != 2 {
		t.Errorf("table has %d lines, want the header and one row:\n%s", lines, got)
	}
	for _, r := range got {
		if r != '\n' && (unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == utf8.RuneError) {
			t.Errorf("table carries %U: %q", r, got)
		}
	}
	want := `read\u001b]52;c;ZXZpbA==\u0007\u001b[2J\u0009x\u000ay\u000d\u202egnp.exe\u200b\u009b31m\ufffd`
	if !strings.Contains(got, want) || !strings.Contains(got, "ok") {
		t.Errorf("table row %q, want the cell shown as %s", got, want)
	}
	// An error message is one line: its line breaks are escaped too.
	if got, want := message("bad\x1b[2J\r\nsecond"), `bad\u001b[2J\u000d\u000asecond`; got != want {
		t.Errorf("message = %q, want %q", got, want)
	}
}

// An archive that cannot be put in place says why (found by review: the
// reason was dropped), and leaves neither the file nor its partial copy.
func TestExportWriterSaysWhy(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ops.jsonl")
	w, finish, err := exportWriter(&env{}, path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("{}\n")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("someone else's"), 0o600); err != nil { // raced in after the check
		t.Fatal(err)
	}
	if err := finish(true); err == nil || !strings.Contains(err.Error(), "file exists") {
		t.Fatalf("finish = %v, want the link's reason", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "someone else's" {
		t.Errorf("the file in the way was changed: %q", got)
	}
	if partial, _ := filepath.Glob(filepath.Join(dir, ".ops.jsonl.partial-*")); len(partial) != 0 {
		t.Errorf("partial copies left: %v", partial)
	}
}

// make run's local CA is used only if this user alone can change it: one
// whose directory others can write (planted in a shared parent such as
// /tmp) is refused with the reason, not trusted (found by review).
func TestDevPKIOnlyIfPrivate(t *testing.T) {
	dir := t.TempDir()
	pkiDir := filepath.Join(dir, devstack.PKIDir)
	if err := os.MkdirAll(pkiDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pkiDir, "ca.crt"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	for _, loose := range []string{pkiDir, filepath.Dir(pkiDir)} {
		if err := os.Chmod(loose, 0o777); err != nil {
			t.Fatal(err)
		}
		var o, e bytes.Buffer // with the default identity: no --insecure-plaintext
		code := Main([]string{"--catalog", "127.0.0.1:1", "tools", "list", "--principal", "alice"}, &o, &e)
		if stderr := e.String(); code == 0 || !strings.Contains(stderr, "is not used") || !strings.Contains(stderr, "writable by others") {
			t.Errorf("%s writable by others: code %d stderr %q", loose, code, e.String())
		}
		if err := os.Chmod(loose, 0o700); err != nil {
			t.Fatal(err)
		}
	}
}

// sharedosctl calls each component only over a handshake with that
// component's role: another component of the plane answering where the
// catalogue should be (its certificate of role provider) fails it, and is
// reported as not serving, not taken for the catalogue (found by review:
// any certificate of the trust domain was accepted).
func TestStatusChecksWhoAnswers(t *testing.T) {
	ca, err := pki.New(pki.TrustDomain, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := ca.WriteBundle(filepath.Join(dir, "ca.crt")); err != nil {
		t.Fatal(err)
	}
	serve := func(role callers.Role) string {
		crt, key, err := ca.IssueFiles(dir, string(role), pki.Leaf{Role: string(role), Name: "x"})
		if err != nil {
			t.Fatal(err)
		}
		creds, err := mtls.Load(t.Context(), mtls.Config{CA: filepath.Join(dir, "ca.crt"), Cert: crt, Key: key})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(creds.Close)
		srv := grpcx.NewServer(grpcx.ServerOptions{Plane: grpcx.Plane{TLS: creds}, Logger: slog.New(slog.DiscardHandler), DrainTimeout: time.Second})
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { _ = srv.Serve(ctx, lis); close(done) }()
		t.Cleanup(func() { cancel(); <-done })
		return lis.Addr().String()
	}
	crt, key, err := ca.IssueFiles(dir, "operator", pki.Leaf{Role: string(callers.Operator), Name: "me"})
	if err != nil {
		t.Fatal(err)
	}
	status := func(catalog string) (serviceStatus, int) {
		t.Helper()
		var o, e bytes.Buffer
		code := Main([]string{"--tls-ca", filepath.Join(dir, "ca.crt"), "--tls-cert", crt, "--tls-key", key,
			"--catalog", catalog, "--authz", "", "--bridge", "", "--files", "", "--timeout", "10s", "status"}, &o, &e)
		var res struct{ Services []serviceStatus }
		if err := json.Unmarshal(o.Bytes(), &res); err != nil || len(res.Services) != 1 {
			t.Fatalf("status JSON %q (%v), stderr %q", o.String(), err, e.String())
		}
		return res.Services[0], code
	}
	if s, code := status(serve(callers.Catalog)); code != 0 || s.Status != "SERVING" {
		t.Errorf("the catalogue: %+v, code %d", s, code)
	}
	if s, code := status(serve(callers.Provider)); code != 1 || s.Status == "SERVING" || !strings.Contains(s.Error, "role provider") {
		t.Errorf("a provider where the catalogue should be: %+v, code %d; want not serving, naming its role", s, code)
	}
}

// The flags issues 7 and 19 write as optional take the defaults their
// usage lines show: a turn opened without --harness is opened (the bridge
// requires a name: it is "unnamed"), and an upstream added without
// --refresh is listed again every 10 minutes; --refresh 0 asks for none.
func TestOptionalFlagsDefaults(t *testing.T) {
	var o openFlags
	fs := flag.NewFlagSet("turn open", flag.ContinueOnError)
	o.bind(fs)
	if err := fs.Parse([]string{"--principal", "alice", "--role", "engineer"}); err != nil {
		t.Fatal(err)
	}
	if o.harness != UnnamedHarness || o.harness == "" {
		t.Errorf("turn open without --harness names %q, want %q", o.harness, UnnamedHarness)
	}
	for _, c := range []struct {
		args []string
		want time.Duration
	}{
		{[]string{"--namespace", "fs", "--url", "http://127.0.0.1:1/mcp"}, 10 * time.Minute},
		{[]string{"--namespace", "fs", "--url", "http://127.0.0.1:1/mcp", "--refresh", "0"}, 0},
		{[]string{"--namespace", "fs", "--url", "http://127.0.0.1:1/mcp", "--refresh", "1h"}, time.Hour},
	} {
		var f addFlags
		fs := flag.NewFlagSet("providers add", flag.ContinueOnError)
		f.bind(fs)
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		spec, err := f.spec()
		if err != nil {
			t.Fatal(err)
		}
		if got := spec.GetRefresh().AsDuration(); got != c.want || (c.want == 0) != (spec.GetRefresh() == nil) {
			t.Errorf("providers add %v: refresh %v (%v), want %v", c.args, got, spec.GetRefresh(), c.want)
		}
	}
}

// fakeCatalog counts the registrations it is sent, and refuses a batch
// when refuse is set. A batch is answered with revisions when set (the
// revision of each name, as GetTool also answers), else without them, as
// a catalog-svc that predates them does.
type fakeCatalog struct {
	sharedosv1.UnimplementedCatalogServiceServer
	single, batches, gets int
	refuse                bool
	revisions             map[string]int64
	answerRevisions       bool
}

func (f *fakeCatalog) RegisterTool(_ context.Context, req *sharedosv1.RegisterToolRequest) (*sharedosv1.RegisterToolResponse, error) {
	f.single++
	reg := req.GetRegistration()
	reg.Revision = 1
	return &sharedosv1.RegisterToolResponse{Registration: reg}, nil
}

func (f *fakeCatalog) RegisterTools(_ context.Context, req *sharedosv1.RegisterToolsRequest) (*sharedosv1.RegisterToolsResponse, error) {
	f.batches++
	if len(req.GetRegistrations()) > 20000 { // as catalog-svc's MaxBatch
		return nil, status.Error(codes.InvalidArgument, "registrations: at most 20000 per call")
	}
	if f.refuse {
		return nil, status.Error(codes.InvalidArgument, "registrations[1].requirement.action: violates known_action")
	}
	resp := &sharedosv1.RegisterToolsResponse{Registered: int32(len(req.GetRegistrations()))}
	if f.answerRevisions {
		for _, r := range req.GetRegistrations() {
			resp.Revisions = append(resp.Revisions, f.revisions[r.GetName()])
		}
	}
	return resp, nil
}

func (f *fakeCatalog) GetTool(_ context.Context, req *sharedosv1.GetToolRequest) (*sharedosv1.GetToolResponse, error) {
	f.gets++
	rev, ok := f.revisions[req.GetName()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "catalog: tool not found: %q", req.GetName())
	}
	return &sharedosv1.GetToolResponse{Registration: &sharedosv1.ToolRegistration{Name: req.GetName(), Revision: rev}}, nil
}

// serveCatalog serves fake on a loopback port and returns its address.
func serveCatalog(t *testing.T, fake sharedosv1.CatalogServiceServer) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	sharedosv1.RegisterCatalogServiceServer(srv, fake)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// twoTools is a registration file listing demo.one and demo.two.
func twoTools(t *testing.T) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "two.yaml")
	if err := os.WriteFile(file, []byte("- name: demo.one\n  description: one\n- name: demo.two\n  description: two\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// registeredOut is tools register's output.
type registeredOut struct {
	Registered []struct {
		Name     string
		Revision int64
	}
}

// A file listing several tools is registered all or nothing (RegisterTools):
// one that fails leaves none registered and says so, never the ones before
// it registered and unreported. Each tool is printed at the revision the
// answer says it was stored at: demo.one, deregistered before at revision
// 2, is at 3 (it was printed at 1).
func TestToolsRegisterAListAllOrNothing(t *testing.T) {
	fake := &fakeCatalog{answerRevisions: true, revisions: map[string]int64{"demo.one": 3, "demo.two": 1}}
	addr := serveCatalog(t, fake)
	file := twoTools(t)

	fake.refuse = true
	_, stderr, code := run(t, "--catalog", addr, "tools", "register", "-f", file)
	if code != 1 || !strings.Contains(stderr, "nothing registered") || !strings.Contains(stderr, "registrations[1]") || fake.single != 0 {
		t.Fatalf("refused list: code %d, %d single registrations, stderr %q", code, fake.single, stderr)
	}

	fake.refuse = false
	stdout, stderr, code := run(t, "--catalog", addr, "tools", "register", "-f", file)
	if code != 0 || fake.batches != 2 || fake.single != 0 || fake.gets != 0 {
		t.Fatalf("list: code %d, %d batches, %d single, %d read back, stderr %q", code, fake.batches, fake.single, fake.gets, stderr)
	}
	var out registeredOut
	if err := json.Unmarshal([]byte(stdout), &out); err != nil || fmt.Sprint(out.Registered) != "[{demo.one 3} {demo.two 1}]" {
		t.Errorf("output %s (%v), want the revisions answered", stdout, err)
	}
}

// A catalog-svc that predates revisions in RegisterTools' answer: each
// tool's revision is read back (GetTool), never assumed to be 1; one that
// cannot be read back is an error that says the file was registered.
func TestToolsRegisterAListReadsBackRevisionsAnOlderCatalogDoesNotAnswer(t *testing.T) {
	fake := &fakeCatalog{revisions: map[string]int64{"demo.one": 3, "demo.two": 1}}
	addr := serveCatalog(t, fake)
	file := twoTools(t)
	stdout, stderr, code := run(t, "--catalog", addr, "tools", "register", "-f", file)
	var out registeredOut
	if err := json.Unmarshal([]byte(stdout), &out); err != nil || code != 0 || fake.gets != 2 || fmt.Sprint(out.Registered) != "[{demo.one 3} {demo.two 1}]" {
		t.Errorf("code %d, %d read back, output %s (%v), stderr %q; want the revisions read back", code, fake.gets, stdout, err, stderr)
	}

	delete(fake.revisions, "demo.two") // deregistered meanwhile
	stdout, stderr, code = run(t, "--catalog", addr, "tools", "register", "-f", file)
	if code != 1 || stdout != "" || !strings.Contains(stderr, "registered every tool of") || !strings.Contains(stderr, `"demo.two"`) {
		t.Errorf("a tool not read back: code %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// A file of more tools than one RegisterTools takes (20000) is refused
// before anything is sent, naming the limit: it is not split into calls
// that would leave it half registered when a later one fails (it was sent
// whole and refused by catalog-svc, or by the message size first). A file
// at the limit is one call.
func TestToolsRegisterRefusesAFileOverTheBatchLimit(t *testing.T) {
	fake := &fakeCatalog{answerRevisions: true}
	addr := serveCatalog(t, fake)
	write := func(n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "- name: demo.t%05d\n", i)
		}
		file := filepath.Join(t.TempDir(), "many.yaml")
		if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		return file
	}
	stdout, stderr, code := run(t, "--catalog", addr, "tools", "register", "-f", write(maxRegisterBatch+1))
	if code != 1 || stdout != "" || fake.batches != 0 || fake.single != 0 ||
		!strings.Contains(stderr, "lists 20001 tools (nothing registered)") || !strings.Contains(stderr, "at most 20000") {
		t.Errorf("20001 tools: code %d, %d batches sent, %d bytes on stdout, stderr %q", code, fake.batches, len(stdout), stderr)
	}
	if _, stderr, code := run(t, "--catalog", addr, "tools", "register", "-f", write(maxRegisterBatch)); code != 0 || fake.batches != 1 {
		t.Errorf("20000 tools: code %d, %d batches sent, stderr %q", code, fake.batches, stderr)
	}
}

// The end user's token in SHAREDOS_USER_TOKEN is never printed (a usage
// error shows every flag's default) and yields to --principal.
func TestUserTokenFromTheEnvironmentStaysUnprinted(t *testing.T) {
	t.Setenv("SHAREDOS_USER_TOKEN", "eyJhbGciOiJSUzI1NiJ9.CANARY.SIG")
	_, stderr, code := run(t, "turn", "open", "--mcp-support", "telepathy")
	if code != 2 || strings.Contains(stderr, "CANARY") {
		t.Errorf("usage error: code %d, stderr %q", code, stderr)
	}
	_, stderr, code = run(t, "--bridge", "127.0.0.1:1", "--timeout", "1s", "turn", "open", "--principal", "alice")
	if code == 2 || strings.Contains(stderr, "not both") || strings.Contains(stderr, "CANARY") {
		t.Errorf("--principal with the token in the environment: code %d, stderr %q", code, stderr)
	}
}

// A command with its own deadline and its own --timeout (providers add:
// one upstream call's bound) refuses a global --timeout before it, which
// could mean either (it panicked: the flag set before its definition), and
// takes its own --timeout after it as its own.
func TestAGlobalTimeoutBeforeADeadlineCommand(t *testing.T) {
	var left, own time.Duration
	register(&command{path: "test deadline", deadline: time.Minute,
		flags: func(fs *flag.FlagSet) { fs.DurationVar(&own, "timeout", 0, "the command's own") },
		run: func(ctx context.Context, _ *env, _ *flag.FlagSet, _ []string) error {
			dl, _ := ctx.Deadline()
			left = time.Until(dl)
			return nil
		}})
	t.Cleanup(func() { commands = commands[:len(commands)-1] })
	if _, stderr, code := run(t, "--timeout", "5m", "test", "deadline"); code != 2 || !strings.Contains(stderr, "--timeout goes after the command") {
		t.Errorf("global --timeout 5m: code %d, stderr %q; want a usage error", code, stderr)
	}
	if _, stderr, code := run(t, "test", "deadline", "--timeout", "3s"); code != 0 || left < 30*time.Second || left > time.Minute || own != 3*time.Second {
		t.Errorf("own --timeout 3s: code %d (%s), deadline in %v, own %v", code, stderr, left, own)
	}
}

// promptsCatalog registers prompts one at a time and refuses the second.
type promptsCatalog struct {
	sharedosv1.UnimplementedCatalogServiceServer
	calls int
}

func (c *promptsCatalog) RegisterPrompt(_ context.Context, r *sharedosv1.RegisterPromptRequest) (*sharedosv1.RegisterPromptResponse, error) {
	c.calls++
	if c.calls == 2 {
		return nil, status.Error(codes.InvalidArgument, "description: violates max_bytes")
	}
	return &sharedosv1.RegisterPromptResponse{Registration: &sharedosv1.PromptRegistration{Name: r.GetRegistration().GetName(), Revision: 1}}, nil
}

// Prompts (and resources) of a list are registered one RPC each: when one
// is refused, those before it stay registered, and the command says which
// and that the rest were not sent.
func TestPromptsRegisterAListSaysWhatWasRegistered(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	fake := &promptsCatalog{}
	sharedosv1.RegisterCatalogServiceServer(srv, fake)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	file := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(file, []byte("- name: p1\n- name: p2\n- name: p3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := run(t, "--catalog", lis.Addr().String(), "prompts", "register", "-f", file)
	var out struct {
		Registered []struct {
			Key      string
			Revision int64
		}
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil || fmt.Sprint(out.Registered) != "[{p1 1}]" {
		t.Errorf("stdout %q (%v), want p1 listed as registered", stdout, err)
	}
	if code != 1 || fake.calls != 2 || !strings.Contains(stderr, `register "p2"`) ||
		!strings.Contains(stderr, "the 1 before it are registered") || !strings.Contains(stderr, "the 1 after it not sent") {
		t.Errorf("code %d, %d calls, stderr %q", code, fake.calls, stderr)
	}
}
