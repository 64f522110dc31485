//go:build verify

package verify

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
)

// hostileCase is one request at a live turn endpoint.
type hostileCase struct {
	name    string
	req     rawReq
	status  int    // exact HTTP status; 0: anything below 500
	code    int    // JSON-RPC error code when the answer is one
	records int    // records the attempt must leave on the turn
	outcome string // "status/code" of the record when records == 1 ("" = don't care, but never succeeded)
}

func hostileCases(tr turn) []hostileCase {
	call := modernCall(1, "verify.echo", `{"path":"/public/x"}`)
	deep := strings.Repeat("[", 100000) + strings.Repeat("]", 100000)
	big := `{"path":"/public/x","value":"` + strings.Repeat("x", 5<<20) + `"}`
	m := func(body string) rawReq { return rawReq{url: tr.URL, token: tr.Token, body: body, modern: true} }
	h := func(body string, headers map[string]string) rawReq {
		r := m(body)
		r.headers = headers
		return r
	}
	legacy := func(body, session string) rawReq {
		r := rawReq{url: tr.URL, token: tr.Token, body: body}
		if session != "" {
			r.headers = map[string]string{"Mcp-Session-Id": session}
		}
		return r
	}
	return []hostileCase{
		{"empty body", m(""), 400, -32700, 0, ""},
		{"truncated JSON", m(call[:len(call)-3]), 400, -32700, 1, "failed/invalid_request"},
		{"batch array", m("[" + call + "]"), 400, -32600, 0, ""},
		{"jsonrpc 1.0", m(strings.Replace(call, `"2.0"`, `"1.0"`, 1)), 400, -32600, 1, "failed/invalid_request"},
		{"null id", m(strings.Replace(call, `"id":1`, `"id":null`, 1)), 400, -32600, 1, "failed/invalid_request"},
		{"absent id", m(strings.Replace(call, `"id":1,`, ``, 1)), 400, -32600, 1, "failed/invalid_request"},
		{"object id", m(strings.Replace(call, `"id":1`, `"id":{"a":1}`, 1)), 400, -32600, 1, "failed/invalid_request"},
		{"response sent by a client", m(`{"jsonrpc":"2.0","id":5,"result":{}}`), 0, 0, 0, ""},
		{"error response sent by a client", m(`{"jsonrpc":"2.0","id":6,"error":{"code":1,"message":"x"}}`), 0, 0, 0, ""},
		{"case-folded Method", m(strings.Replace(call, `"method"`, `"Method"`, 1)), 400, -32600, 1, "failed/invalid_request"},
		{"long-s paramſ", m(strings.Replace(call, `"params"`, `"paramſ"`, 1)), 400, -32600, 1, "failed/invalid_request"},
		{"duplicate name, allowed first", m(strings.Replace(call, `"name":"verify.echo"`, `"name":"verify.echo","name":"verify.boom"`, 1)), 400, -32600, 1, "failed/invalid_request"},
		{"duplicate name, allowed last", m(strings.Replace(call, `"name":"verify.echo"`, `"name":"verify.boom","name":"verify.echo"`, 1)), 400, -32600, 1, "failed/invalid_request"},
		{"escaped duplicate n\\u0061me", m(strings.Replace(call, `"name":"verify.echo"`, `"name":"verify.echo","n\u0061me":"verify.boom"`, 1)), 400, -32600, 1, "failed/invalid_request"},
		{"non-string name", m(strings.Replace(call, `"name":"verify.echo"`, `"name":42`, 1)), 400, -32602, 1, "failed/invalid_request"},
		{"Kelvin-sign key", m(strings.Replace(call, `"name":"verify.echo"`, `"name":"verify.echo","\u212aey":1,"key":2`, 1)), 400, -32600, 1, "failed/invalid_request"},
		{"duplicate arguments key", m(modernCall(1, "verify.echo", `{"path":"/private/a.txt","path":"/public/x"}`)), 0, 0, 1, ""},
		// Attempts other than a tools/call are recorded too, under their
		// kind; a body that names one anywhere is one, whatever Mcp-Method says.
		{"truncated prompts/get", m(`{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"verify.prompt"`), 400, -32700, 1, "failed/invalid_request"},
		{"truncated resources/read", m(`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///public/x"`), 400, -32700, 1, "failed/invalid_request"},
		{"duplicate method, tools/call last", h(`{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"tools/call","params":{"name":"verify.echo","arguments":{}}}`,
			map[string]string{"Mcp-Method": "tools/list"}), 400, -32600, 1, "failed/invalid_request"},
		{"invalid UTF-8 in name", m(strings.Replace(call, "verify.echo", "verify\xff.echo", 1)), 400, -32700, 1, "failed/invalid_request"},
		{"invalid UTF-8 in arguments", m(modernCall(1, "verify.echo", "{\"path\":\"/public/\xc3\x28\"}")), 400, -32700, 1, "failed/invalid_request"},
		{"NUL in an argument", m(modernCall(1, "verify.echo", `{"path":"/public/x","value":"a\u0000b"}`)), 200, 0, 1, ""},
		{"NUL in a path argument", m(modernCall(1, "verify.echo", `{"path":"/public/x\u0000/../../private/a.txt"}`)), 200, 0, 1, ""},
		{"NUL in the tool name", h(modernCall(1, "verify.echo\u0000", `{"path":"/public/x"}`), map[string]string{"Mcp-Name": b64Name("verify.echo\x00")}), 200, 0, 1, "denied/tool_unavailable"},
		{"5 MiB arguments", m(modernCall(1, "verify.echo", big)), 413, 0, 1, "failed/invalid_request"},
		{"100-deep nesting", m(modernCall(1, "verify.echo", strings.Repeat("[", 100)+strings.Repeat("]", 100))), 400, -32600, 1, "failed/invalid_request"},
		// Valid JSON beyond MaxDepth is an invalid request (-32600), not a
		// parse error, however deep it goes.
		{"10^5-deep nesting", m(modernCall(1, "verify.echo", deep)), 400, -32600, 1, "failed/invalid_request"},
		{"Mcp-Method missing", h(call, map[string]string{"Mcp-Method": ""}), 400, -32020, 1, "failed/invalid_request"},
		{"bad base64 Mcp-Name", h(call, map[string]string{"Mcp-Name": "=?base64?!!notbase64?="}), 400, -32020, 1, "failed/invalid_request"},
		{"text/plain cross-site POST", h(call, map[string]string{"Content-Type": "text/plain"}), 415, 0, 0, ""},
		{"form cross-site POST", h(call, map[string]string{"Content-Type": "application/x-www-form-urlencoded"}), 415, 0, 0, ""},
		{"bad Origin", h(call, map[string]string{"Origin": "https://evil.example"}), 403, 0, 0, ""},
		{"null Origin", h(call, map[string]string{"Origin": "null"}), 403, 0, 0, ""},
		{"rebinding Host", h(call, map[string]string{"Host": "evil.example"}), 403, 0, 0, ""},
		{"rebinding Host with port", h(call, map[string]string{"Host": "evil.example:80"}), 403, 0, 0, ""},
		{"PUT", rawReq{method: http.MethodPut, url: tr.URL, token: tr.Token, body: call}, 405, 0, 0, ""},
		{"unknown tool", m(modernCall(1, "admin.delete", `{}`)), 200, 0, 1, "denied/tool_unavailable"},
		{"129-char tool name", m(modernCall(1, strings.Repeat("a", 129), `{}`)), 200, 0, 1, "denied/tool_unavailable"},
		// An empty name cannot travel in Mcp-Name: refused at the edge and
		// recorded (or, with a header, refused by the kernel and recorded).
		{"empty tool name", m(modernCall(1, "", `{}`)), 0, 0, 1, ""},
		{"look-alike tool name", m(modernCall(1, "verify\u2024echo", `{"path":"/public/x"}`)), 200, 0, 1, "denied/tool_unavailable"},
		{"path traversal ..", m(modernCall(1, "files.read", `{"path":"/public/../private/a.txt"}`)), 200, 0, 1, "denied/permission_denied"},
		{"path traversal ./..//", m(modernCall(1, "files.read", `{"path":"/public/./..//private/a.txt"}`)), 200, 0, 1, "denied/permission_denied"},
		{"prefix collision /publicity", m(modernCall(1, "files.read", `{"path":"/publicity/a.txt"}`)), 200, 0, 1, "denied/permission_denied"},
		{"percent-encoded dots", m(modernCall(1, "files.read", `{"path":"/public/%2e%2e/private/a.txt"}`)), 200, 0, 1, "denied/permission_denied"},
		{"fullwidth dots", m(modernCall(1, "files.read", `{"path":"/public/．．/private/a.txt"}`)), 200, 0, 1, "denied/permission_denied"},
		{"backslashes", m(modernCall(1, "files.read", `{"path":"\\public\\..\\private\\a.txt"}`)), 200, 0, 1, "denied/permission_denied"},
		{"relative path", m(modernCall(1, "files.read", `{"path":"../private/a.txt"}`)), 200, 0, 1, "denied/permission_denied"},
		{"symlink out of /public", m(modernCall(1, "files.read", `{"path":"/public/link/secret.txt"}`)), 200, 0, 1, ""},
		// A 2025-era request without a session of this turn is refused as
		// Refused (no session: 400; one the turn did not mint: mcp-go's
		// 404), recorded, whatever it names: an unpinned prompt or
		// resource is no way past the session check.
		{"2025-era prompts/get, no session", legacy(`{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"verify.prompt"}}`, ""), 400, 0, 1, "failed/invalid_request"},
		{"2025-era prompts/get, invented session", legacy(`{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"verify.prompt"}}`, "bogus"), 404, 0, 1, "failed/invalid_request"},
		{"2025-era resources/read, invented session", legacy(`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///private/a.txt"}}`, "bogus"), 404, 0, 1, "failed/invalid_request"},
		{"2025-era tools/call, invented session", legacy(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"verify.echo","arguments":{"path":"/public/x"}}}`, "bogus"), 404, 0, 1, "failed/invalid_request"},
	}
}

// TestHostileInput sends each hostile request at a live turn: the right
// protocol error or refusal, within 10 s, nothing executed that was not
// recorded, the private file never disclosed, and exactly the expected
// records on the turn.
func TestHostileInput(t *testing.T) {
	s := startStack(t, stackOptions{})
	tr := s.open("alice")
	wantTotal := 0
	for _, tc := range hostileCases(tr) {
		t.Run(tc.name, func(t *testing.T) {
			before := s.rowCount(tr.ID)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			resp := send(ctx, tc.req)
			if resp.err != nil {
				t.Fatalf("no answer within 10s: %v", resp.err)
			}
			switch {
			case tc.status == 0 && resp.status >= 500:
				t.Errorf("HTTP %d %s, want no server error", resp.status, truncate(string(resp.body), 300))
			case tc.status != 0 && resp.status != tc.status:
				t.Errorf("HTTP %d %s, want %d", resp.status, truncate(string(resp.body), 300), tc.status)
			}
			msg, ok := resp.rpc()
			if tc.code != 0 && (!ok || msg.Error == nil || msg.Error.Code != tc.code) {
				t.Errorf("answer %s, want JSON-RPC error %d", truncate(string(resp.body), 300), tc.code)
			}
			if strings.Contains(string(resp.body), privateCanary) {
				t.Errorf("the private file was disclosed: %s", truncate(string(resp.body), 300))
			}
			if ok && msg.Result != nil && !msg.Result.IsError && tc.outcome != "" {
				t.Errorf("succeeded, want %s: %s", tc.outcome, truncate(string(resp.body), 300))
			}
			if tc.outcome != "" && ok && msg.Result != nil {
				if got := msg.outcome(); got.Status+"/"+got.Code != tc.outcome {
					t.Errorf("outcome %s/%s, want %s (%s)", got.Status, got.Code, tc.outcome, truncate(string(resp.body), 300))
				}
			}
			if tc.name == "symlink out of /public" && ok && msg.Result != nil && !msg.Result.IsError {
				t.Errorf("a symlink out of /public was followed: %s", truncate(string(resp.body), 300))
			}
			s.waitSettled(tr.ID, 10*time.Second)
			if got := s.rowCount(tr.ID) - before; got != tc.records {
				t.Errorf("%d records, want %d", got, tc.records)
			} else if got == 1 && tc.outcome != "" {
				rows := s.ops(tr.ID)
				if r := rows[len(rows)-1]; r.Status+"/"+r.Code != tc.outcome {
					t.Errorf("recorded %s/%s (%q), want %s", r.Status, r.Code, r.Reason, tc.outcome)
				}
			}
		})
		wantTotal += tc.records
	}
	if n := s.rowCount(tr.ID); n != wantTotal {
		t.Errorf("turn has %d records, want %d", n, wantTotal)
	}
	checkHandledMatchRecords(t, s, tr.ID)
	// The endpoint still works after all of it.
	expectOutcome(t, mustCall(t, tr, "verify.echo", `{"path":"/public/x"}`), "succeeded", "")
}

// TestHeaderMismatchRecorded: a 2026-era tools/call whose Mcp-Name names
// another tool than the body is answered 400 + -32020, is not executed, and
// — the turn being known — leaves one record (anchors #27: "the attempt
// recorded with both names").
func TestHeaderMismatchRecorded(t *testing.T) {
	s := startStack(t, stackOptions{})
	tr := s.open("alice")
	resp := do(t, rawReq{url: tr.URL, token: tr.Token, body: modernCall(1, "verify.echo", `{"path":"/public/x"}`), modern: true,
		headers: map[string]string{"Mcp-Name": "verify.boom"}})
	msg, ok := resp.rpc()
	if resp.status != 400 || !ok || msg.Error == nil || msg.Error.Code != -32020 {
		t.Fatalf("HTTP %d %s, want 400 + -32020", resp.status, resp.body)
	}
	if n := s.provider.handled.Load(); n != 0 {
		t.Errorf("handler ran %d times", n)
	}
	if n := s.rowCount(tr.ID); n != 1 {
		t.Errorf("a HeaderMismatch tools/call on a known turn left %d records, want 1", n)
	}
}

// TestOversizeStreams: 64 MiB bodies — chunked, a lying Content-Length, and
// an honest huge Content-Length — are cut off in bounded time and memory,
// are each recorded as a refused attempt, and leave the bridge serving.
func TestOversizeStreams(t *testing.T) {
	s := startStack(t, stackOptions{})
	tr := s.open("alice")
	bridge := s.Bridges[0]
	rss0 := rssKiB(t, bridge.PID())
	const size = 64 << 20
	body := func() io.Reader {
		head := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"verify.echo","arguments":{"path":"/public/x","value":"`
		return io.MultiReader(strings.NewReader(head), io.LimitReader(repeatReader('x'), size))
	}

	t.Run("chunked 64 MiB", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, tr.URL, body())
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = -1
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+tr.Token)
		start := time.Now()
		resp, err := httpClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestEntityTooLarge {
				t.Errorf("HTTP %d, want 413", resp.StatusCode)
			}
		} else {
			t.Logf("client saw %v (the server closed the stream early)", err)
		}
		if d := time.Since(start); d > 15*time.Second {
			t.Errorf("took %s", d)
		}
	})
	for _, cl := range []int{64, size} {
		t.Run(fmt.Sprintf("Content-Length %d with a 64 MiB body", cl), func(t *testing.T) {
			status, d := rawPost(t, s.BridgeHTTP[0], tr, cl, body())
			t.Logf("status line %q after %s", status, d)
			if d > 15*time.Second {
				t.Errorf("took %s", d)
			}
			if strings.Contains(status, " 5") {
				t.Errorf("server error %q", status)
			}
			if cl == size && !strings.Contains(status, " 413") {
				t.Errorf("status %q, want 413 before the body is read", status)
			}
			if cl == 64 && !strings.Contains(status, " 400") {
				t.Errorf("status %q, want 400 (64 bytes of truncated JSON)", status)
			}
		})
	}
	rss1 := rssKiB(t, bridge.PID())
	t.Logf("bridge RSS %d KiB → %d KiB", rss0, rss1)
	if rss1-rss0 > 48<<10 {
		t.Errorf("bridge RSS grew by %d KiB for 64 MiB bodies: not bounded by the 4 MiB cap", rss1-rss0)
	}
	// Each is a tools/call on a live turn (its first bytes say so): each is
	// recorded, failed/invalid_request, and nothing runs (issue 17 item 7).
	s.waitSettled(tr.ID, 10*time.Second)
	if got := s.outcomeCounts(tr.ID); got["failed/invalid_request"] != 3 || len(got) != 1 {
		t.Errorf("records from oversize bodies: %v, want 3 failed/invalid_request", got)
	}
	if n := s.provider.handled.Load(); n != 0 {
		t.Errorf("handler ran %d times", n)
	}
	expectOutcome(t, mustCall(t, tr, "verify.echo", `{"path":"/public/x"}`), "succeeded", "")
}

// b64Name is the Mcp-Name sentinel form for names a header cannot carry.
func b64Name(name string) string {
	return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(name)) + "?="
}

type repeatReader byte

func (r repeatReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}

// rawPost writes a request with the given Content-Length header and then
// streams body regardless (a lying client), and returns the status line.
func rawPost(t *testing.T, hostport string, tr turn, contentLength int, body io.Reader) (string, time.Duration) {
	t.Helper()
	start := time.Now()
	conn, err := net.DialTimeout("tcp", hostport, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(15 * time.Second))
	path := tr.URL[strings.Index(tr.URL, "/turns/"):]
	head := "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n" +
		"Authorization: Bearer " + tr.Token + "\r\nContent-Length: " + strconv.Itoa(contentLength) + "\r\n\r\n"
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(conn, body) }() // stops when the server closes
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return "no status line: " + err.Error(), time.Since(start)
	}
	return strings.TrimSpace(line), time.Since(start)
}

func rssKiB(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return n
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// checkHandledMatchRecords: for every call the provider ran on the turn, a
// record exists whose requested and resolved tool are the dispatched tool
// and whose arguments digest is the SHA-256 of the very bytes the handler
// received (recorded == authorized == dispatched).
func checkHandledMatchRecords(t *testing.T, s *stack, turnID string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, h := range s.provider.snapshot() {
		if h.TurnID != turnID {
			continue
		}
		var requested, resolved, digest, status string
		err := s.db.QueryRow(ctx, `SELECT requested_tool, resolved_tool, arguments_digest, status FROM catalog.operations
			WHERE turn_id = $1 AND call_id = $2 AND NOT duplicate`, turnID, h.CallID).Scan(&requested, &resolved, &digest, &status)
		if err != nil {
			t.Errorf("handled call %s: no record (%v)", h.CallID, err)
			continue
		}
		sum := sha256.Sum256(h.Args)
		if requested != h.Tool || resolved != h.Tool {
			t.Errorf("call %s: recorded %q/%q, dispatched %q", h.CallID, requested, resolved, h.Tool)
		}
		if d := hex.EncodeToString(sum[:]); digest != d && digest != "sha256:"+d {
			t.Errorf("call %s: recorded arguments digest %s, handler got bytes with digest %s", h.CallID, digest, d)
		}
	}
}

// TestCaseFoldedKeysNeverReachAProvider (issue 17, item 1): with files.read
// re-registered WITHOUT additionalProperties:false (registration refuses
// that unless requirement.open_arguments says so), an argument key that
// differs from the authorized one only in case ({"path": public, "PATH":
// private}) would be read by the files provider's case-insensitive decoding.
// The kernel refuses it as failed/invalid_arguments, recorded; the provider
// never runs and the private file never appears. (The files provider itself
// also refuses a key that is not exactly its own: its unit tests.)
func TestCaseFoldedKeysNeverReachAProvider(t *testing.T) {
	s := startStack(t, stackOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got, err := s.catalogC.GetTool(ctx, &sharedosv1.GetToolRequest{Name: "files.read"})
	if err != nil {
		t.Fatal(err)
	}
	reg := got.GetRegistration()
	reg.InputSchemaJson = []byte(`{"type":"object","properties":{"path":{"type":"string","minLength":1,"maxLength":4096}},"required":["path"]}`)
	reg.Requirement.OpenArguments = true // the opt-out registration requires for it
	if _, err := s.catalogC.UpdateTool(ctx, &sharedosv1.UpdateToolRequest{Registration: reg}); err != nil {
		t.Fatalf("re-register files.read without additionalProperties: %v", err)
	}
	tr := s.open("alice")
	for _, args := range []string{
		`{"path":"/public/a.txt","PATH":"/private/secret.txt"}`,
		`{"PATH":"/private/secret.txt","path":"/public/a.txt"}`,
		`{"path":"/public/a.txt","Path":"/private/secret.txt"}`,
	} {
		c := mustCall(t, tr, "files.read", args)
		expectOutcome(t, c, "failed", "invalid_arguments")
		if strings.Contains(string(c.resp.body), privateCanary) {
			t.Fatalf("%s: the private file came back", args)
		}
	}
	rows := s.ops(tr.ID)
	if len(rows) != 3 {
		t.Fatalf("%d records for 3 attempts", len(rows))
	}
	for _, r := range rows {
		if r.Status != "failed" || r.Code != "invalid_arguments" || !strings.Contains(r.Reason, "differ only in case") {
			t.Errorf("record %+v", r)
		}
	}
	// The same turn still reads what the policy allows.
	expectOutcome(t, mustCall(t, tr, "files.read", `{"path":"/public/a.txt"}`), "succeeded", "")
}

// TestInitializeFlood (issue 17, item 8): 100,000 2025-era initializes on
// one turn — 16 at a time on kept-alive connections — leave the bridge's
// RSS bounded (it grew ≈10 KiB per initialize before sessions were
// forgotten and initialize was budgeted per turn), every one past the
// turn's budget is a 429, and the turn still serves a new session.
func TestInitializeFlood(t *testing.T) {
	s := startStack(t, stackOptions{})
	tr := s.open("alice")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	legacySession(ctx, t, tr, "2025-11-25")
	rss0 := rssKiB(t, s.Bridges[0].PID())
	const total, workers = 100_000, 16
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"flood","version":"0"}}}`
	var next, ok, limited, other atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for next.Add(1) <= total && ctx.Err() == nil {
				switch r := send(ctx, rawReq{url: tr.URL, token: tr.Token, body: body}); r.status {
				case http.StatusOK:
					ok.Add(1)
				case http.StatusTooManyRequests:
					limited.Add(1)
				default:
					if other.Add(1) <= 3 {
						t.Errorf("initialize answered %d %v %s", r.status, r.err, r.body)
					}
				}
			}
		})
	}
	wg.Wait()
	d := time.Since(start)
	rss1 := rssKiB(t, s.Bridges[0].PID())
	t.Logf("%d initializes in %s (%.0f/s): %d served, %d refused 429, %d other; bridge RSS %d KiB → %d KiB",
		total, d.Round(time.Millisecond), total/d.Seconds(), ok.Load(), limited.Load(), other.Load(), rss0, rss1)
	if ok.Load()+limited.Load() != total {
		t.Fatalf("only %d of %d initializes were answered 200 or 429", ok.Load()+limited.Load(), total)
	}
	if limited.Load() == 0 {
		t.Errorf("no initialize was refused: the per-turn budget is not applied")
	}
	if rss1-rss0 > 32<<10 {
		t.Errorf("bridge RSS grew by %d KiB over %d initializes: not bounded", rss1-rss0, total)
	}
	httpTransport.CloseIdleConnections()
	// The budget refills: the turn still opens a session and serves a call.
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := send(ctx, rawReq{url: tr.URL, token: tr.Token, body: body})
		if r.status == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no initialize served 10 s after the flood: %d %s", r.status, r.body)
		}
		time.Sleep(100 * time.Millisecond) // the budget refills 10 per second
	}
	expectOutcome(t, mustCall(t, tr, "verify.echo", `{"path":"/public/x"}`), "succeeded", "")
}

// TestUnpinnedEntries: a prompts/get or resources/read naming nothing the
// turn pinned is refused by the kernel (denied/tool_unavailable) only once
// mcp-go has checked the request as it checks every other — transport
// headers, session, params; a request it refuses before is recorded
// failed/invalid_request whatever it names, as a tools/call is. One record
// each, in both eras.
func TestUnpinnedEntries(t *testing.T) {
	s := startStack(t, stackOptions{})
	tr := s.open("alice")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sid := legacySession(ctx, t, tr, "2025-11-25")
	session := map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"}
	prompt := `{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"verify.prompt"`
	read := `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///private/a.txt"`
	modern := func(body string, headers map[string]string) rawReq {
		return rawReq{url: tr.URL, token: tr.Token, body: body, modern: true, headers: headers}
	}
	for _, tc := range []struct {
		name    string
		req     rawReq
		outcome string
	}{
		{"2026-07-28 prompts/get", modern(prompt+`,`+modernMeta+`}}`, nil), "denied/tool_unavailable"},
		{"2026-07-28 resources/read", modern(read+`,`+modernMeta+`}}`, map[string]string{"Mcp-Name": "file:///private/a.txt"}), "denied/tool_unavailable"},
		{"2026-07-28 prompts/get, no _meta version", modern(prompt+`}}`, nil), "failed/invalid_request"},
		{"2026-07-28 prompts/get, Last-Event-ID", modern(prompt+`,`+modernMeta+`}}`, map[string]string{"Last-Event-ID": "1"}), "failed/invalid_request"},
		{"2026-07-28 resources/read, no _meta version", modern(read+`}}`, map[string]string{"Mcp-Name": "file:///private/a.txt"}), "failed/invalid_request"},
		{"2025-11-25 prompts/get in a session", rawReq{url: tr.URL, token: tr.Token, body: prompt + `}}`, headers: session}, "denied/tool_unavailable"},
		{"2025-11-25 resources/read in a session", rawReq{url: tr.URL, token: tr.Token, body: read + `}}`, headers: session}, "denied/tool_unavailable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := s.rowCount(tr.ID)
			resp := do(t, tc.req)
			// A refusal: a 4xx, or on 2025 eras a JSON-RPC error with 200
			// (as mcp-go answers its own).
			if r, _ := resp.rpc(); (resp.status < 400 || resp.status >= 500) && (resp.status != 200 || r.Error == nil) {
				t.Errorf("HTTP %d %s, want a refusal", resp.status, truncate(string(resp.body), 300))
			}
			if strings.Contains(string(resp.body), privateCanary) {
				t.Errorf("the private file was disclosed: %s", truncate(string(resp.body), 300))
			}
			s.waitSettled(tr.ID, 10*time.Second)
			rows := s.ops(tr.ID)
			if len(rows)-before != 1 {
				t.Fatalf("%d records, want 1", len(rows)-before)
			}
			if r := rows[len(rows)-1]; r.Status+"/"+r.Code != tc.outcome {
				t.Errorf("recorded %s/%s (%q), want %s; answered %d %s", r.Status, r.Code, r.Reason, tc.outcome, resp.status, truncate(string(resp.body), 200))
			}
		})
	}
}
