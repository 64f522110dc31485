package app_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sharedos/toolshare/bridge-svc/internal/app"
	"github.com/sharedos/toolshare/bridge-svc/internal/bridgetest"
	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
)

// TestEdgeSecurity: every rule the edge enforces. A request refused before
// its turn is known touches nothing; a tools/call refused on a live turn
// reaches the kernel only as a record-only rejection (issue 17 item 7:
// before, none of the parse refusals left a record).
func TestEdgeSecurity(t *testing.T) {
	f := &fixture{catalog: &bridgetest.FakeCatalog{}, kernel: bridgetest.NewFakeKernel()}
	f.catalog.SetTools(bridgetest.DefaultTools())
	addr := bridgetest.ServeFakes(t, f.catalog, f.kernel)
	f.bridge = bridgetest.Start(t, addr, "", func(c *app.Config) { c.MaxBodyBytes = 2048 })

	a := f.bridge.Open(t)
	b := f.bridge.Open(t)
	closed := f.bridge.Open(t)
	if _, err := f.bridge.Client.CloseTurn(context.Background(), &sharedosv1.CloseTurnRequest{TurnId: closed.GetTurnId()}); err != nil {
		t.Fatal(err)
	}
	// A one-nanosecond lease has expired by the time any request arrives.
	expired := f.bridge.Open(t, func(r *sharedosv1.OpenTurnRequest) { r.Ttl = durationpb.New(time.Nanosecond) })
	call := modernCall(1, "files.read", `{"path":"/public/a.txt"}`)
	base := f.bridge.URL

	cases := []struct {
		name   string
		req    rawReq
		status int
		code   int // JSON-RPC error code, when the answer is one
	}{
		// Refused before the turn is known: nothing reaches the kernel.
		{"no bearer", rawReq{url: a.GetMcpUrl(), body: call, modern: true}, 401, 0},
		{"wrong bearer", rawReq{url: a.GetMcpUrl(), token: "not-the-token", body: call, modern: true}, 401, 0},
		{"basic auth", rawReq{url: a.GetMcpUrl(), body: call, modern: true, headers: map[string]string{"Authorization": "Basic " + a.GetToken()}}, 401, 0},
		{"turn A's token on turn B", rawReq{url: b.GetMcpUrl(), token: a.GetToken(), body: call, modern: true}, 404, 0},
		{"unknown turn", rawReq{url: base + "/turns/taaaaaaaaaaaaaaaaaaaaaaaaaa/mcp", token: a.GetToken(), body: call, modern: true}, 404, 0},
		{"malformed turn id", rawReq{url: base + "/turns/../mcp", token: a.GetToken(), body: call, modern: true}, 404, 0},
		{"closed turn", rawReq{url: closed.GetMcpUrl(), token: closed.GetToken(), body: call, modern: true}, 404, 0},
		{"expired turn", rawReq{url: expired.GetMcpUrl(), token: expired.GetToken(), body: call, modern: true}, 404, 0},
		{"foreign origin", rawReq{url: a.GetMcpUrl(), token: a.GetToken(), body: call, modern: true, headers: map[string]string{"Origin": "https://evil.example"}}, 403, 0},
		{"null origin", rawReq{url: a.GetMcpUrl(), token: a.GetToken(), body: call, modern: true, headers: map[string]string{"Origin": "null"}}, 403, 0},
		{"rebinding host", rawReq{url: a.GetMcpUrl(), token: a.GetToken(), body: call, modern: true, headers: map[string]string{"Host": "evil.example"}}, 403, 0},
		{"text/plain simple request", rawReq{url: a.GetMcpUrl(), token: a.GetToken(), body: call, modern: true, headers: map[string]string{"Content-Type": "text/plain"}}, 415, 0},
		// Refused on a live turn: recorded, never run.
		{"body over the cap", rawReq{url: a.GetMcpUrl(), token: a.GetToken(), body: modernCall(1, "files.read", `{"path":"`+strings.Repeat("x", 4096)+`"}`), modern: true}, 413, 0},
		{"null id", rawReq{url: a.GetMcpUrl(), token: a.GetToken(), body: strings.Replace(call, `"id":1`, `"id":null`, 1), modern: true}, 400, -32600},
		{"missing id on tools/call", rawReq{url: a.GetMcpUrl(), token: a.GetToken(), body: strings.Replace(call, `"id":1,`, ``, 1), modern: true}, 400, -32600},
		{"object id", rawReq{url: a.GetMcpUrl(), token: a.GetToken(), body: strings.Replace(call, `"id":1`, `"id":{"a":1}`, 1), modern: true}, 400, -32600},
		{"batch", rawReq{url: a.GetMcpUrl(), token: a.GetToken(), body: "[" + call + "]", modern: true}, 400, -32600},
		{"jsonrpc 1.0", rawReq{url: a.GetMcpUrl(), token: a.GetToken(), body: strings.Replace(call, `"2.0"`, `"1.0"`, 1), modern: true}, 400, -32600},
		{"truncated JSON", rawReq{url: a.GetMcpUrl(), token: a.GetToken(), body: call[:len(call)-3], modern: true}, 400, -32700},
		{"truncated tools/call under Mcp-Method tools/list", rawReq{url: a.GetMcpUrl(), token: a.GetToken(), body: call[:len(call)-3], modern: true, headers: map[string]string{"Mcp-Method": "tools/list"}}, 400, -32700},
		{"invalid UTF-8", rawReq{url: a.GetMcpUrl(), token: a.GetToken(), body: strings.Replace(call, "files.read", "files\xff.read", 1), modern: true}, 400, -32700},
		{"case-folded Method", rawReq{url: a.GetMcpUrl(), token: a.GetToken(), body: strings.Replace(call, `"method"`, `"Method"`, 1), modern: true}, 400, -32600},
		{"long-s paramſ", rawReq{url: a.GetMcpUrl(), token: a.GetToken(), body: strings.Replace(call, `"params"`, `"paramſ"`, 1), modern: true}, 400, -32600},
		{"duplicate name", rawReq{url: a.GetMcpUrl(), token: a.GetToken(), body: strings.Replace(call, `"name":"files.read"`, `"name":"files.read","name":"admin.delete"`, 1), modern: true}, 400, -32600},
		{"Kelvin-sign nameK", rawReq{url: a.GetMcpUrl(), token: a.GetToken(), body: strings.Replace(call, `"name":"files.read"`, `"name":"files.read","\u212aey":1,"key":2`, 1), modern: true}, 400, -32600},
		{"deep nesting", rawReq{url: a.GetMcpUrl(), token: a.GetToken(), body: modernCall(1, "files.read", strings.Repeat("[", 100)+strings.Repeat("]", 100)), modern: true}, 400, -32600},
		{"Mcp-Name mismatch", rawReq{url: a.GetMcpUrl(), token: a.GetToken(), body: call, modern: true, headers: map[string]string{"Mcp-Name": "admin.delete"}}, 400, -32020},
		{"PUT", rawReq{method: http.MethodPut, url: a.GetMcpUrl(), token: a.GetToken(), body: call}, 405, 0},
		// Not a tools/call: refused, nothing recorded.
		{"subscriptions/listen", rawReq{url: a.GetMcpUrl(), token: a.GetToken(), modern: true,
			body: `{"jsonrpc":"2.0","id":3,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},` + modernMeta + `}}`}, 404, -32601},
	}
	// A batch is refused whole and not recorded: it is no one attempt.
	recorded := map[string]bool{"body over the cap": true, "null id": true, "missing id on tools/call": true, "object id": true,
		"jsonrpc 1.0": true, "truncated JSON": true, "truncated tools/call under Mcp-Method tools/list": true, "invalid UTF-8": true, "case-folded Method": true, "long-s paramſ": true,
		"duplicate name": true, "Kelvin-sign nameK": true, "deep nesting": true, "Mcp-Name mismatch": true}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := len(f.kernel.Calls())
			defer func() {
				calls := f.kernel.Calls()[before:]
				switch {
				case !recorded[tc.name] && len(calls) != 0:
					t.Errorf("kernel saw %v, want nothing", calls)
				case recorded[tc.name] && (len(calls) != 1 || calls[0].GetEdgeRejection() == "" ||
					!strings.HasPrefix(calls[0].GetTool(), "files")):
					t.Errorf("kernel saw %v, want one record-only rejection of files.read", calls)
				}
			}()
			resp := do(t, tc.req)
			if resp.status != tc.status {
				t.Fatalf("status = %d (%s), want %d", resp.status, resp.body, tc.status)
			}
			if tc.code != 0 {
				if code, _ := resp.rpcError(); code != tc.code {
					t.Errorf("JSON-RPC error = %s, want code %d", resp.body, tc.code)
				}
			}
			if tc.status == 401 && resp.header.Get("WWW-Authenticate") == "" {
				t.Errorf("401 without WWW-Authenticate")
			}
		})
	}
	if c := f.kernel.Calls(); !strings.Contains(c[len(c)-1].GetEdgeRejection(), `"admin.delete"`) {
		t.Errorf("the Mcp-Name mismatch was recorded as %q, want both names", c[len(c)-1].GetEdgeRejection())
	}
	rejections := len(f.kernel.Calls())

	// The same request passes with an allowed or absent Origin, and with the
	// bridge's own loopback origin (issue 17, item 11): the rules above
	// refused for the reason named, not for something else.
	_, port, _ := net.SplitHostPort(f.bridge.App.HTTPAddr())
	own := "http://localhost:" + port
	for _, origin := range []string{"", bridgetest.AllowedOrigin, own} {
		h := map[string]string{}
		if origin != "" {
			h["Origin"] = origin
		}
		resp := do(t, rawReq{url: a.GetMcpUrl(), token: a.GetToken(), body: call, modern: true, headers: h})
		if resp.status != 200 || !strings.Contains(string(resp.body), "contents of /public/a.txt") {
			t.Errorf("origin %q: %d %s", origin, resp.status, resp.body)
		}
	}
	if n := len(f.kernel.Calls()) - rejections; n != 3 {
		t.Errorf("kernel saw %d calls, want the three passing requests", n)
	}
}

// TestRawListSnapshot checks the tools/list bytes: raw schemas verbatim, the
// dispatcher hidden, catalogHash and cache hints in the modern result.
func TestRawListSnapshot(t *testing.T) {
	f := newFixture(t)
	lease := f.bridge.Open(t)
	resp := do(t, rawReq{url: lease.GetMcpUrl(), token: lease.GetToken(), body: modernList(3), modern: true})
	if resp.status != 200 {
		t.Fatalf("list: %d %s", resp.status, resp.body)
	}
	var out struct {
		Result struct {
			Meta       map[string]any    `json:"_meta"`
			TTL        *int              `json:"ttlMs"`
			CacheScope string            `json:"cacheScope"`
			Tools      []json.RawMessage `json:"tools"`
		} `json:"result"`
	}
	if err := json.Unmarshal(resp.body, &out); err != nil {
		t.Fatalf("%v: %s", err, resp.body)
	}
	r := out.Result
	if r.Meta["io.sharedos/catalogHash"] != lease.GetCatalogHash() || r.TTL == nil || *r.TTL != 0 || r.CacheScope != "private" {
		t.Errorf("list result = %s", resp.body)
	}
	if len(r.Tools) != 3 {
		t.Fatalf("tools = %d, want 3 (dispatcher hidden): %s", len(r.Tools), resp.body)
	}
	var first struct {
		InputSchema json.RawMessage `json:"inputSchema"`
		Annotations json.RawMessage `json:"annotations"`
	}
	_ = json.Unmarshal(r.Tools[0], &first)
	if string(first.InputSchema) != string(lease.GetTools()[0].GetInputSchemaJson()) {
		t.Errorf("inputSchema = %s, want verbatim %s", first.InputSchema, lease.GetTools()[0].GetInputSchemaJson())
	}
	if string(first.Annotations) != `{"readOnlyHint":true}` {
		t.Errorf("annotations = %s", first.Annotations)
	}
	if strings.Contains(string(resp.body), "sharedos dispatch") {
		t.Errorf("dispatcher leaked into tools/list")
	}
}

// TestModernCancelNotificationIgnored: in 2026-07-28 only closing the stream
// cancels; a notifications/cancelled naming another request's id is dropped
// and that request completes.
func TestModernCancelNotificationIgnored(t *testing.T) {
	f := newFixture(t)
	lease := f.bridge.Open(t)
	done := startSlowWait(t, f, lease, 88)
	cancelNote := `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":88,"reason":"x",` + modernMeta + `}}`
	resp := do(t, rawReq{url: lease.GetMcpUrl(), token: lease.GetToken(), body: cancelNote, modern: true})
	if resp.status != http.StatusAccepted {
		t.Fatalf("cancel notification: %d %s", resp.status, resp.body)
	}
	f.kernel.Release <- struct{}{}
	got := <-done
	if got.status != 200 || !strings.Contains(string(got.body), "released") {
		t.Errorf("slow call after a foreign cancel = %d %s, want it to complete", got.status, got.body)
	}
}

// TestModernCancelRequestAnswered: a 2026-07-28 message named
// notifications/cancelled that carries an id is a request, and JSON-RPC
// owes a request an answer: it gets the one any notification method sent
// as a request gets (mcp-go's 404, -32601 method not found, for its id),
// while a request of the same id in flight completes. Only a real
// notification is absorbed (before, the id was ignored: 202, no answer).
func TestModernCancelRequestAnswered(t *testing.T) {
	f := newFixture(t)
	lease := f.bridge.Open(t)
	done := startSlowWait(t, f, lease, 88)
	asRequest := func(method string) rawResp {
		return do(t, rawReq{url: lease.GetMcpUrl(), token: lease.GetToken(), modern: true,
			body: `{"jsonrpc":"2.0","id":88,"method":"` + method + `","params":{"requestId":88,"reason":"x",` + modernMeta + `}}`})
	}
	initialized := asRequest("notifications/initialized")
	wantCode, _ := initialized.rpcError()
	if wantCode != -32601 {
		t.Fatalf("notifications/initialized as a request: %d %s, want a -32601 error", initialized.status, initialized.body)
	}
	resp := asRequest("notifications/cancelled")
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	_ = json.Unmarshal(resp.body, &m)
	if code, _ := resp.rpcError(); resp.status != initialized.status || code != wantCode || string(m.ID) != "88" {
		t.Errorf("notifications/cancelled as a request: %d %s, want %d and a %d error for id 88 (as notifications/initialized)",
			resp.status, resp.body, initialized.status, wantCode)
	}
	f.kernel.Release <- struct{}{}
	got := <-done
	if got.status != 200 || !strings.Contains(string(got.body), "released") {
		t.Errorf("slow call after a cancel sent as a request = %d %s, want it to complete", got.status, got.body)
	}
}

// TestLegacyCancelSendsNothing: a 2025-era notifications/cancelled ends the
// call (the kernel sees its context cancelled) and nothing more is sent for
// the cancelled request: its POST ends as an empty event stream, never a
// JSON-RPC error (issue 17 item 10; failed before the fix with -32603
// "context canceled").
func TestLegacyCancelSendsNothing(t *testing.T) {
	f := newFixture(t)
	lease := f.bridge.Open(t)
	session := legacySession(t, lease)
	done := make(chan rawResp, 1)
	go func() {
		resp, _ := send(rawReq{url: lease.GetMcpUrl(), token: lease.GetToken(), headers: session,
			body: `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"slow.wait","arguments":{}}}`})
		done <- resp
	}()
	waitFor(t, f.kernel.Started, "slow.wait start")
	cancelNote := `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"user"}}`
	if resp := do(t, rawReq{url: lease.GetMcpUrl(), token: lease.GetToken(), body: cancelNote, headers: session}); resp.status != http.StatusAccepted {
		t.Fatalf("cancel notification: %d %s", resp.status, resp.body)
	}
	waitFor(t, f.kernel.Cancelled, "slow.wait cancelled")
	got := <-done
	if got.status != http.StatusOK || got.header.Get("Content-Type") != "text/event-stream" || len(bytes.TrimSpace(got.body)) != 0 {
		t.Errorf("cancelled request answered %d %q %q, want an empty event stream", got.status, got.header.Get("Content-Type"), got.body)
	}
}

// TestLegacySessionBoundToTurn: a session id minted for turn A is refused
// on turn B, even with B's valid token.
func TestLegacySessionBoundToTurn(t *testing.T) {
	f := newFixture(t)
	a, b := f.bridge.Open(t), f.bridge.Open(t)
	init := do(t, rawReq{url: a.GetMcpUrl(), token: a.GetToken(), body: legacyInit})
	sid := init.header.Get("Mcp-Session-Id")
	if init.status != 200 || sid == "" {
		t.Fatalf("initialize: %d %s (session %q)", init.status, init.body, sid)
	}
	ok := do(t, rawReq{url: a.GetMcpUrl(), token: a.GetToken(), body: legacyList(2), headers: map[string]string{"Mcp-Session-Id": sid}})
	if ok.status != 200 {
		t.Fatalf("list on A with A's session: %d %s", ok.status, ok.body)
	}
	cross := do(t, rawReq{url: b.GetMcpUrl(), token: b.GetToken(), body: legacyList(2), headers: map[string]string{"Mcp-Session-Id": sid}})
	if cross.status != http.StatusNotFound {
		t.Errorf("A's session on B = %d %s, want 404", cross.status, cross.body)
	}
	forged := do(t, rawReq{url: a.GetMcpUrl(), token: a.GetToken(), body: legacyList(2), headers: map[string]string{"Mcp-Session-Id": "mcp-session-00000000-0000-0000-0000-000000000000"}})
	if forged.status != http.StatusNotFound {
		t.Errorf("forged session = %d %s, want 404", forged.status, forged.body)
	}
	// GET (standalone stream) is not offered; DELETE is accepted.
	if g := do(t, rawReq{method: http.MethodGet, url: a.GetMcpUrl(), token: a.GetToken(), headers: map[string]string{"Mcp-Session-Id": sid}}); g.status != http.StatusMethodNotAllowed {
		t.Errorf("GET = %d, want 405", g.status)
	}
}

// TestMCPGoRefusalsRecorded (issue 17 item 7): the 2026-era header checks
// mcp-go makes before any hook of ours — Mcp-Method ≠ body method, header
// version ≠ _meta version, client capabilities missing, an Mcp-Param-*
// header ≠ its argument — and a legacy call on a forged session are each
// answered as mcp-go answers them and recorded as a record-only rejection
// (nothing runs), with no quoted header value in the record.
func TestMCPGoRefusalsRecorded(t *testing.T) {
	f := &fixture{catalog: &bridgetest.FakeCatalog{}, kernel: bridgetest.NewFakeKernel()}
	f.catalog.SetTools(append(bridgetest.DefaultTools(), bridgetest.Tool("geo.lookup", "Look up a region.",
		`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}},"additionalProperties":false}`, "", "")))
	addr := bridgetest.ServeFakes(t, f.catalog, f.kernel)
	f.bridge = bridgetest.Start(t, addr, "")
	tr := f.bridge.Open(t)
	call := modernCall(1, "files.read", `{"path":"/public/a.txt"}`)
	noCaps := strings.Replace(call, `"io.modelcontextprotocol/clientCapabilities":{},`, ``, 1)
	legacy := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"files.read","arguments":{"path":"/public/a.txt"}}}`
	for _, tc := range []struct {
		name string
		req  rawReq
	}{
		{"Mcp-Method is not the body's method", rawReq{body: call, modern: true, headers: map[string]string{"Mcp-Method": "tools/list"}}},
		{"header version is not the _meta version", rawReq{body: call, modern: true, headers: map[string]string{"Mcp-Protocol-Version": "2025-11-25"}}},
		{"client capabilities missing", rawReq{body: noCaps, modern: true}},
		{"Mcp-Param header is not the argument", rawReq{body: modernCall(1, "geo.lookup", `{"region":"eu-west-secret"}`), modern: true,
			headers: map[string]string{"Mcp-Param-Region": "us-east-secret"}}},
		{"legacy call on a forged session", rawReq{body: legacy, headers: map[string]string{"Mcp-Session-Id": "mcp-s1-forged.forged", "Mcp-Protocol-Version": "2025-11-25"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.url, tc.req.token = tr.GetMcpUrl(), tr.GetToken()
			before := len(f.kernel.Calls())
			resp := do(t, tc.req)
			code, _ := resp.rpcError()
			if resp.status < 400 && code == 0 {
				t.Fatalf("answered %d %s, want a refusal", resp.status, resp.body)
			}
			calls := f.kernel.Calls()[before:]
			if len(calls) != 1 || !strings.HasPrefix(calls[0].GetEdgeRejection(), "refused by the MCP server") {
				t.Fatalf("kernel saw %v, want one record-only rejection", calls)
			}
			if r := calls[0].GetEdgeRejection(); strings.Contains(r, "secret") {
				t.Errorf("the record's reason quotes a header value: %q", r)
			}
			t.Logf("%d %s → recorded %q", resp.status, bytes.TrimSpace(resp.body), calls[0].GetEdgeRejection())
		})
	}
}

// TestAClientThatLeavesIsRecorded (invariant 4): a client that writes a
// whole request mcp-go refuses and closes its connection at once leaves a
// record all the same — mcp-go writes its refusal nowhere then. (A call
// its handler takes is recorded when the client left before it went to
// the kernel: forward's TestACallWhoseClientLeftIsRecorded.)
func TestAClientThatLeavesIsRecorded(t *testing.T) {
	f := newFixture(t)
	tr := f.bridge.Open(t)
	call := modernCall(1, "files.read", `{"path":"/public/a.txt"}`)
	for _, tc := range []struct {
		name string
		req  rawReq
	}{
		{"a tools/call mcp-go refuses", rawReq{body: call, modern: true, headers: map[string]string{"Mcp-Method": "tools/list"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.url, tc.req.token = tr.GetMcpUrl(), tr.GetToken()
			for range 10 {
				before := len(f.kernel.Calls())
				req, err := tc.req.request()
				if err != nil {
					t.Fatal(err)
				}
				conn, err := net.Dial("tcp", req.URL.Host)
				if err != nil {
					t.Fatal(err)
				}
				if err := req.Write(conn); err != nil {
					t.Fatal(err)
				}
				_ = conn.Close()
				deadline := time.Now().Add(30 * time.Second)
				for len(f.kernel.Calls()) == before {
					if time.Now().After(deadline) {
						t.Fatal("no record of a request whose client left")
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
		})
	}
}

// TestARefusedBodyIsNotWaitedFor: a request refused before its body is
// read (here: no bearer) is answered at once and its connection closed,
// though it declared a body it never sends — the connection is not held
// open waiting for it.
func TestARefusedBodyIsNotWaitedFor(t *testing.T) {
	f := newFixture(t)
	tr := f.bridge.Open(t)
	u, err := url.Parse(tr.GetMcpUrl())
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "POST "+u.Path+" HTTP/1.1\r\nHost: "+u.Host+"\r\nContent-Type: application/json\r\n"+
		"Accept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second)) // a bound on failure, not a wait
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a request refused before its body: %v", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !resp.Close {
		t.Errorf("answered %d, close %v; want 401 and the connection closed", resp.StatusCode, resp.Close)
	}
}

// TestProgressBothEras (the MCP surface, item 2): a tools/call with a
// progress token is sent as InvokeToolStream and its client receives the
// kernel's reports as notifications/progress for that token on the
// request's own stream, in order, before the result; one without a token is
// a plain InvokeTool.
func TestProgressBothEras(t *testing.T) {
	f := newFixture(t)
	f.kernel.Progress = []float64{0, 50, 100}
	tr := f.bridge.Open(t)
	legacy := legacySession(t, tr)
	for _, c := range []struct {
		name string
		req  rawReq
	}{
		{"2026-07-28", rawReq{modern: true, body: `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"files.read","arguments":{"path":"/public/a.txt"},` +
			`"_meta":{"progressToken":"tok-5","io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"}}}}`}},
		{"2025-11-25", rawReq{headers: legacy, body: `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"files.read","arguments":{"path":"/public/a.txt"},"_meta":{"progressToken":"tok-5"}}}`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.req.url, c.req.token = tr.GetMcpUrl(), tr.GetToken()
			streamed := f.kernel.Streamed()
			resp := do(t, c.req)
			var events []map[string]any
			for _, line := range strings.Split(string(resp.body), "\n") {
				if data, ok := strings.CutPrefix(line, "data: "); ok {
					var m map[string]any
					if err := json.Unmarshal([]byte(data), &m); err != nil {
						t.Fatalf("event %q: %v", data, err)
					}
					events = append(events, m)
				}
			}
			if resp.status != 200 || len(events) != 4 {
				t.Fatalf("answer %d %s, want 3 progress events and the result", resp.status, resp.body)
			}
			for i, want := range []float64{0, 50, 100} {
				params, _ := events[i]["params"].(map[string]any)
				if events[i]["method"] != "notifications/progress" || params["progressToken"] != "tok-5" || params["progress"] != want || params["total"] != 100.0 {
					t.Errorf("event %d = %v, want progress %v of 100 for tok-5", i, events[i], want)
				}
			}
			if _, ok := events[3]["result"]; !ok || !strings.Contains(string(resp.body), "contents of /public/a.txt") {
				t.Errorf("last event %v, want the result", events[3])
			}
			if f.kernel.Streamed() != streamed+1 {
				t.Errorf("the call did not go as InvokeToolStream")
			}
		})
	}
	streamed := f.kernel.Streamed()
	if r := do(t, rawReq{url: tr.GetMcpUrl(), token: tr.GetToken(), modern: true, body: modernCall(9, "files.read", `{"path":"/public/a.txt"}`)}); r.status != 200 || strings.Contains(string(r.body), "notifications/progress") {
		t.Fatalf("a call without a token: %d %s", r.status, r.body)
	}
	if f.kernel.Streamed() != streamed {
		t.Errorf("a call without a progress token went as InvokeToolStream")
	}
}

// TestCancelStopsProgress: a 2025-era call that reports progress and is
// then cancelled ends its stream with at most the report that came before
// the cancel (it may still be in flight when the cancel lands) and nothing
// more — no result, no error.
func TestCancelStopsProgress(t *testing.T) {
	f := newFixture(t)
	f.kernel.Progress = []float64{10}
	tr := f.bridge.Open(t)
	session := legacySession(t, tr)
	done := make(chan rawResp, 1)
	go func() {
		resp, _ := send(rawReq{url: tr.GetMcpUrl(), token: tr.GetToken(), headers: session,
			body: `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"slow.wait","arguments":{},"_meta":{"progressToken":7}}}`})
		done <- resp
	}()
	waitFor(t, f.kernel.Started, "slow.wait start")
	cancelNote := `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"user"}}`
	if resp := do(t, rawReq{url: tr.GetMcpUrl(), token: tr.GetToken(), body: cancelNote, headers: session}); resp.status != http.StatusAccepted {
		t.Fatalf("cancel notification: %d %s", resp.status, resp.body)
	}
	waitFor(t, f.kernel.Cancelled, "slow.wait cancelled")
	got := <-done
	body := string(got.body)
	if got.status != http.StatusOK || strings.Count(body, "notifications/progress") > 1 ||
		strings.Contains(body, `"result"`) || strings.Contains(body, `"error"`) {
		t.Errorf("cancelled call with progress answered %d %q, want at most its one report and nothing more", got.status, body)
	}
}

// TestTerminatedSessionIs404: a 2025-era session ended with DELETE is
// answered 404 from then on (the conformance suite's
// server-session-terminated-returns-404); another session of the turn goes
// on; a forged id cannot be ended.
func TestTerminatedSessionIs404(t *testing.T) {
	f := newFixture(t)
	tr := f.bridge.Open(t)
	ended, other := legacySession(t, tr), legacySession(t, tr)
	if r := do(t, rawReq{method: http.MethodDelete, url: tr.GetMcpUrl(), token: tr.GetToken(), headers: ended}); r.status != 200 {
		t.Fatalf("DELETE: %d %s", r.status, r.body)
	}
	if r := do(t, rawReq{url: tr.GetMcpUrl(), token: tr.GetToken(), body: legacyList(2), headers: ended}); r.status != http.StatusNotFound {
		t.Errorf("the ended session: %d %s, want 404", r.status, r.body)
	}
	before := len(f.kernel.Calls())
	call := `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"files.read","arguments":{"path":"/public/a.txt"}}}`
	if r := do(t, rawReq{url: tr.GetMcpUrl(), token: tr.GetToken(), body: call, headers: ended}); r.status != http.StatusNotFound {
		t.Errorf("a call on the ended session: %d %s, want 404", r.status, r.body)
	}
	if calls := f.kernel.Calls()[before:]; len(calls) != 1 || calls[0].GetEdgeRejection() == "" || calls[0].GetTool() != "files.read" {
		t.Errorf("kernel saw %v, want one record-only rejection", calls)
	}
	if r := do(t, rawReq{url: tr.GetMcpUrl(), token: tr.GetToken(), body: legacyList(3), headers: other}); r.status != 200 {
		t.Errorf("another session of the turn: %d %s", r.status, r.body)
	}
	forged := map[string]string{"Mcp-Session-Id": "mcp-s1-forged.forged", "Mcp-Protocol-Version": "2025-11-25"}
	if r := do(t, rawReq{method: http.MethodDelete, url: tr.GetMcpUrl(), token: tr.GetToken(), headers: forged}); r.status != http.StatusNotFound {
		t.Errorf("DELETE of a forged session: %d, want 404", r.status)
	}
}

// legacySession initializes a 2025-11-25 session on lease's turn and
// returns the headers its later requests carry.
func legacySession(t *testing.T, lease *sharedosv1.TurnLease) map[string]string {
	t.Helper()
	init := do(t, rawReq{url: lease.GetMcpUrl(), token: lease.GetToken(), body: legacyInit})
	sid := init.header.Get("Mcp-Session-Id")
	if init.status != 200 || sid == "" {
		t.Fatalf("initialize: %d %s", init.status, init.body)
	}
	return map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"}
}

// TestAttemptsNamedByTheHeaderRecorded (invariant 4): a request whose
// Mcp-Method header says tools/call is a tools/call when it is refused,
// whatever its body's method: refused 400 -32020 and recorded once as a
// record-only rejection of the tool Mcp-Name names, never run. Before, the
// bridge looked at the body's method alone: mcp-go's refusal of a
// tools/list body under a tools/call header went unrecorded, and so did
// the bridge's own of a repeated Mcp-Method; a notification under it was
// not even refused (202: mcp-go checks no header of a notification). The
// rule holds in every era, as the repeated-header one does: a 2025-era
// tools/list under a tools/call header, which mcp-go served, is refused
// and recorded too.
func TestAttemptsNamedByTheHeaderRecorded(t *testing.T) {
	f := newFixture(t)
	tr := f.bridge.Open(t)
	list := modernList(5)
	callHeaders := map[string][]string{"Mcp-Method": {"tools/call"}, "Mcp-Name": {"files.read"}}
	session := legacySession(t, tr)
	for _, tc := range []struct {
		name    string
		body    string
		headers map[string][]string
		id      string // the id the error answers (JSON)
		legacy  bool
	}{
		{"2025-era tools/list under a tools/call header", legacyList(5), map[string][]string{"Mcp-Method": {"tools/call"}, "Mcp-Name": {"files.read"},
			"Mcp-Session-Id": {session["Mcp-Session-Id"]}, "Mcp-Protocol-Version": {session["Mcp-Protocol-Version"]}}, "5", true},
		{"tools/list body under a tools/call header", list, callHeaders, "5", false},
		{"case-folded Tools/Call body under a tools/call header",
			strings.Replace(modernCall(5, "files.read", `{"path":"/public/a.txt"}`), `"tools/call"`, `"Tools/Call"`, 1), callHeaders, "5", false},
		{"tools/list body under two tools/call headers", list,
			map[string][]string{"Mcp-Method": {"tools/call", "tools/call"}, "Mcp-Name": {"files.read"}}, "5", false},
		{"tools/list body under tools/list and tools/call headers", list,
			map[string][]string{"Mcp-Method": {"tools/list", "tools/call"}, "Mcp-Name": {"files.read"}}, "5", false},
		{"a notification under a tools/call header",
			`{"jsonrpc":"2.0","method":"notifications/initialized","params":{` + modernMeta + `}}`, callHeaders, "null", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := rawReq{url: tr.GetMcpUrl(), token: tr.GetToken(), body: tc.body, modern: !tc.legacy}.request()
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.headers {
				req.Header[k] = v
			}
			before := len(f.kernel.Calls())
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			got := rawResp{status: resp.StatusCode, header: resp.Header, body: body}
			calls := f.kernel.Calls()[before:]
			if len(calls) != 1 || calls[0].GetEdgeRejection() == "" || calls[0].GetTool() != "files.read" ||
				calls[0].GetKind() != sharedosv1.CallKind_CALL_KIND_UNSPECIFIED {
				t.Errorf("kernel saw %v, want one record-only rejection of the tools/call files.read", calls)
			}
			var m struct {
				ID json.RawMessage `json:"id"`
			}
			_ = json.Unmarshal(got.body, &m)
			if code, _ := got.rpcError(); got.status != http.StatusBadRequest || code != -32020 || string(m.ID) != tc.id {
				t.Errorf("answered %d %s, want 400 and a -32020 error for id %s", got.status, got.body, tc.id)
			}
			if len(calls) == 1 {
				t.Logf("%d %s → recorded %q", got.status, bytes.TrimSpace(got.body), calls[0].GetEdgeRejection())
			}
		})
	}
}

// startSlowWait sends a 2026-07-28 slow.wait call of id on lease and
// returns once the kernel started it; its answer arrives on the channel.
func startSlowWait(t *testing.T, f *fixture, lease *sharedosv1.TurnLease, id int) <-chan rawResp {
	t.Helper()
	done := make(chan rawResp, 1)
	go func() {
		resp, _ := send(rawReq{url: lease.GetMcpUrl(), token: lease.GetToken(), body: modernCall(id, "slow.wait", `{}`), modern: true})
		done <- resp
	}()
	waitFor(t, f.kernel.Started, "slow.wait start")
	return done
}

// TestIdleConnectionsDoNotHoldTheBound (reliability row 46): with
// --max-connections 1, a second client is served in place of an idle
// keep-alive connection, which the bridge closes; without the bound the
// connections of a flood took the process to its open-file limit.
func TestIdleConnectionsDoNotHoldTheBound(t *testing.T) {
	f := &fixture{catalog: &bridgetest.FakeCatalog{}, kernel: bridgetest.NewFakeKernel()}
	addr := bridgetest.ServeFakes(t, f.catalog, f.kernel)
	f.bridge = bridgetest.Start(t, addr, "", func(c *app.Config) { c.MaxConnections = 1 })
	u, err := url.Parse(f.bridge.URL)
	if err != nil {
		t.Fatal(err)
	}
	get := func(conn net.Conn, r *bufio.Reader) {
		t.Helper()
		if _, err := io.WriteString(conn, "GET /nothing HTTP/1.1\r\nHost: "+u.Host+"\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second)) // a bound on failure, not a wait
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatalf("no answer: %v", err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.Close {
			t.Fatal("the answer closed its connection; the test needs it kept alive")
		}
	}
	first, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	firstR := bufio.NewReader(first)
	get(first, firstR)
	second, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	get(second, bufio.NewReader(second))
	_ = first.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := firstR.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("the idle connection: read = %v, want EOF (closed for the second client)", err)
	}
}
