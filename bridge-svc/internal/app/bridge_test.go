package app_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sharedos/toolshare/bridge-svc/internal/bridgetest"
	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/outcome"
)

// fixture is a bridge on the memory store in front of the fakes.
type fixture struct {
	catalog *bridgetest.FakeCatalog
	kernel  *bridgetest.FakeKernel
	bridge  *bridgetest.Bridge
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{catalog: &bridgetest.FakeCatalog{}, kernel: bridgetest.NewFakeKernel()}
	f.catalog.SetTools(bridgetest.DefaultTools())
	addr := bridgetest.ServeFakes(t, f.catalog, f.kernel)
	f.bridge = bridgetest.Start(t, addr, "")
	return f
}

// waitFor receives from ch or fails the test after a generous bound (a
// safety net against hangs, not a timing assertion).
func waitFor(t *testing.T, ch <-chan string, what string) string {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		t.Fatalf("%s never happened", what)
		return ""
	}
}

// TestClientsBothEras runs the real MCP clients (mcp-go and the official
// go-sdk) in every protocol era against one turn: list, allowed call,
// denied call, an unknown name forwarded and refused, cancellation.
func TestClientsBothEras(t *testing.T) {
	f := newFixture(t)
	for _, kind := range clientKinds {
		for _, e := range eras {
			t.Run(kind.name+"/"+e.name, func(t *testing.T) {
				lease := f.bridge.Open(t)
				seen := &headerLog{}
				c := kind.connect(t, lease.GetMcpUrl(), lease.GetToken(), e, seen)
				defer c.Close()
				ctx := context.Background()

				tools, meta, err := c.List(ctx)
				if err != nil {
					t.Fatalf("list: %v", err)
				}
				var names []string
				for _, tv := range tools {
					names = append(names, tv.Name)
					md := asMap(tv.Meta["io.sharedos/metadata"])
					ns, _, _ := strings.Cut(tv.Name, ".")
					if md["namespace"] != ns || md["source"] != "provider:"+ns {
						t.Errorf("tool %s _meta = %v, want namespace/source", tv.Name, tv.Meta)
					}
				}
				if got := strings.Join(names, ","); got != "files.read,notes.append,slow.wait" {
					t.Errorf("tools = %s, want exactly the pinned snapshot", got)
				}
				if meta["io.sharedos/catalogHash"] != lease.GetCatalogHash() || lease.GetCatalogHash() == "" {
					t.Errorf("list _meta = %v, want catalogHash %q", meta, lease.GetCatalogHash())
				}

				ok, err := c.Call(ctx, "files.read", map[string]any{"path": "/public/a.txt"})
				if err != nil {
					t.Fatalf("allowed call: %v", err)
				}
				if ok.IsError || ok.Text != "contents of /public/a.txt" {
					t.Errorf("allowed call = %+v", ok)
				}

				denied, err := c.Call(ctx, "files.read", map[string]any{"path": "/private/a.txt"})
				if err != nil {
					t.Fatalf("denied call: %v (a refusal must be a result, not an error)", err)
				}
				om := asMap(denied.Meta[outcome.MetaKey])
				if !denied.IsError || !strings.HasPrefix(denied.Text, "denied: ") ||
					om["status"] != "denied" || om["code"] != outcome.PermissionDenied || om["callId"] == "" || om["decisionId"] == nil {
					t.Errorf("denied call = %+v", denied)
				}

				unknown, err := c.Call(ctx, "github.search", map[string]any{"q": "x"})
				if err != nil {
					t.Fatalf("unknown tool: %v (must be forwarded and answered as a result)", err)
				}
				om = asMap(unknown.Meta[outcome.MetaKey])
				if !unknown.IsError || !strings.HasPrefix(unknown.Text, "denied: ") || om["code"] != outcome.ToolUnavailable {
					t.Errorf("unknown tool = %+v", unknown)
				}

				calls := callsOfTurn(f.kernel, lease.GetTurnId())
				if len(calls) != 3 {
					t.Fatalf("kernel saw %d calls of this turn, want 3", len(calls))
				}
				if calls[2].GetTool() != "github.search" {
					t.Errorf("unknown name reached the kernel as %q, want the raw requested name", calls[2].GetTool())
				}
				for _, call := range calls {
					// The grant the kernel issued at OpenTurn, for this
					// turn and alice: the only context a call carries.
					g := f.kernel.Grant(call.GetGrant())
					if g == nil || g.TurnID != lease.GetTurnId() || g.Context.GetPrincipal() != "alice" || call.GetHarness() != "test-harness" {
						t.Errorf("ToolCall lacks the lease's grant/harness: %v", call)
					}
				}
				if calls[0].GetCallId() == calls[1].GetCallId() {
					t.Errorf("call ids repeat: %q", calls[0].GetCallId())
				}

				// Cancellation: the client gives up, the kernel's context ends.
				cctx, cancel := context.WithCancel(ctx)
				errc := make(chan error, 1)
				go func() {
					_, err := c.Call(cctx, "slow.wait", map[string]any{})
					errc <- err
				}()
				id := waitFor(t, f.kernel.Started, "slow.wait start")
				cancel()
				if got := waitFor(t, f.kernel.Cancelled, "kernel-side cancellation"); got != id {
					t.Errorf("cancelled call %q, want %q", got, id)
				}
				if err := <-errc; err == nil {
					t.Errorf("cancelled call returned no error")
				}

				wantHeader := e.version
				if wantHeader == "" {
					wantHeader = "2026-07-28"
				}
				if !seen.saw(wantHeader) {
					t.Errorf("client never sent Mcp-Protocol-Version %s: era not exercised (saw %v)", wantHeader, seen.versions)
				}
			})
		}
	}
}

func callsOfTurn(k *bridgetest.FakeKernel, turnID string) []*sharedosv1.ToolCall {
	var out []*sharedosv1.ToolCall
	for _, c := range k.Calls() {
		if c.GetTurnId() == turnID {
			out = append(out, c)
		}
	}
	return out
}

// TestGeminiWaitForPrevious: Gemini CLI injects wait_for_previous into every
// tool's arguments; it is stripped unless the tool's schema declares it.
func TestGeminiWaitForPrevious(t *testing.T) {
	f := newFixture(t)
	lease := f.bridge.Open(t)
	c := connectMCPGo(t, lease.GetMcpUrl(), lease.GetToken(), eras[2], nil)
	defer c.Close()
	ctx := context.Background()
	if _, err := c.Call(ctx, "files.read", map[string]any{"path": "/public/a.txt", "wait_for_previous": true}); err != nil {
		t.Fatal(err)
	}
	res, err := c.Call(ctx, "notes.append", map[string]any{"text": "hi", "wait_for_previous": true})
	if err != nil {
		t.Fatal(err)
	}
	calls := callsOfTurn(f.kernel, lease.GetTurnId())
	var read, note map[string]any
	_ = json.Unmarshal(calls[0].GetArgumentsJson(), &read)
	_ = json.Unmarshal(calls[1].GetArgumentsJson(), &note)
	if _, ok := read["wait_for_previous"]; ok || read["path"] != "/public/a.txt" {
		t.Errorf("files.read arguments = %s, want wait_for_previous stripped", calls[0].GetArgumentsJson())
	}
	if note["wait_for_previous"] != true {
		t.Errorf("notes.append arguments = %s, want wait_for_previous kept (its schema declares it)", calls[1].GetArgumentsJson())
	}
	if res.IsError {
		t.Errorf("notes.append = %+v", res)
	}
}

// TestAliasNeverReachesToolCall: a harness alias is forwarded raw (and so
// refused and recorded), never rewritten to the canonical name.
func TestAliasNeverReachesToolCall(t *testing.T) {
	f := newFixture(t)
	lease := f.bridge.Open(t)
	c := connectGoSDK(t, lease.GetMcpUrl(), lease.GetToken(), eras[1], nil)
	defer c.Close()
	res, err := c.Call(context.Background(), "mcp__sharedos__files_read", map[string]any{"path": "/public/a.txt"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.HasPrefix(res.Text, "denied: ") {
		t.Errorf("alias call = %+v, want refused", res)
	}
	calls := callsOfTurn(f.kernel, lease.GetTurnId())
	if len(calls) != 1 || calls[0].GetTool() != "mcp__sharedos__files_read" {
		t.Errorf("kernel saw %v, want the raw alias", calls)
	}
}

// TestPortableNames: a turn opened with portable names publishes files_read
// and the kernel receives files.read.
func TestPortableNames(t *testing.T) {
	f := newFixture(t)
	lease := f.bridge.Open(t, func(r *sharedosv1.OpenTurnRequest) { r.PortableNames = true })
	c := connectMCPGo(t, lease.GetMcpUrl(), lease.GetToken(), eras[0], nil)
	defer c.Close()
	ctx := context.Background()
	tools, _, err := c.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools) != 3 || tools[0].Name != "files_read" || tools[1].Name != "notes_append" {
		t.Errorf("portable tools = %v", tools)
	}
	res, err := c.Call(ctx, "files_read", map[string]any{"path": "/public/b.txt"})
	if err != nil || res.IsError {
		t.Fatalf("files_read = %+v, %v", res, err)
	}
	calls := callsOfTurn(f.kernel, lease.GetTurnId())
	if len(calls) != 1 || calls[0].GetTool() != "files.read" {
		t.Errorf("kernel saw %v, want files.read", calls)
	}
}

// TestOpenTurnRefusesUnservableCatalogue: a catalogue tool the MCP edge
// could not publish stops OpenTurn (no lease, no URL that would only fail).
func TestOpenTurnRefusesUnservableCatalogue(t *testing.T) {
	f := newFixture(t)
	bad := bridgetest.Tool("files.read", "Read a file.", `{"type":"object"}`, "", "")
	bad.AnnotationsJson = []byte(`["not","an","object"]`)
	f.catalog.SetTools([]*sharedosv1.PublishedTool{bad})
	_, err := f.bridge.Client.OpenTurn(context.Background(), bridgetest.OpenRequest())
	if status.Code(err) != codes.FailedPrecondition {
		t.Errorf("OpenTurn = %v, want FailedPrecondition", err)
	}
}
