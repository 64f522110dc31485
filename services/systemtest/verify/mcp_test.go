//go:build verify

package verify

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

const modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"verify","version":"1"}}`

var rpcID atomic.Int64

// modernCall is a 2026-07-28 tools/call body.
func modernCall(id int64, name, args string) string {
	return `{"jsonrpc":"2.0","id":` + fmt.Sprint(id) + `,"method":"tools/call","params":{"name":` + quote(name) +
		`,"arguments":` + args + `,` + modernMeta + `}}`
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }

// httpClient is shared so idle connections can be closed before fd counts.
var httpTransport = &http.Transport{MaxIdleConnsPerHost: 256, IdleConnTimeout: 30 * time.Second}
var httpClient = &http.Client{Transport: httpTransport, Timeout: 60 * time.Second}

// rawReq is one HTTP request at an MCP endpoint.
type rawReq struct {
	method  string
	url     string
	token   string
	body    string
	modern  bool              // add MCP-Protocol-Version / Mcp-Method / Mcp-Name from the body
	headers map[string]string // applied last ("" value deletes)
}

type rawResp struct {
	status  int
	header  http.Header
	body    []byte
	elapsed time.Duration
	err     error
}

// rpc is a decoded JSON-RPC answer (from JSON or an SSE data line).
type rpc struct {
	ID     json.RawMessage `json:"id"`
	Result *struct {
		IsError bool `json:"isError"`
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		Meta map[string]json.RawMessage `json:"_meta"`
	} `json:"result"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// outcomeMeta is _meta["io.sharedos/outcome"].
type outcomeMeta struct {
	Status, Code, CallID, DecisionID string
}

func (r rawResp) rpc() (rpc, bool) {
	var out rpc
	b := bytes.TrimSpace(r.body)
	if bytes.HasPrefix(b, []byte("event:")) || bytes.HasPrefix(b, []byte("data:")) || bytes.HasPrefix(b, []byte("id:")) {
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		var last []byte
		for sc.Scan() {
			if d, ok := bytes.CutPrefix(sc.Bytes(), []byte("data:")); ok {
				last = append([]byte(nil), bytes.TrimSpace(d)...)
			}
		}
		b = last
	}
	if json.Unmarshal(b, &out) != nil {
		return out, false
	}
	return out, true
}

// text is the concatenated text content of a result.
func (r rpc) text() string {
	if r.Result == nil {
		return ""
	}
	var sb strings.Builder
	for _, c := range r.Result.Content {
		sb.WriteString(c.Text)
	}
	return sb.String()
}

func (r rpc) outcome() outcomeMeta {
	var o outcomeMeta
	if r.Result != nil {
		if raw, ok := r.Result.Meta["io.sharedos/outcome"]; ok {
			var m map[string]any
			_ = json.Unmarshal(raw, &m)
			o.Status, _ = m["status"].(string)
			o.Code, _ = m["code"].(string)
			o.CallID, _ = m["callId"].(string)
			o.DecisionID, _ = m["decisionId"].(string)
		}
	}
	return o
}

func newRequest(ctx context.Context, r rawReq) (*http.Request, error) {
	m := r.method
	if m == "" {
		m = http.MethodPost
	}
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(ctx, m, r.url, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if r.token != "" {
		req.Header.Set("Authorization", "Bearer "+r.token)
	}
	if r.modern {
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		var msg struct {
			Method string `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		_ = json.Unmarshal([]byte(r.body), &msg)
		if msg.Method != "" && headerSafe(msg.Method) {
			req.Header.Set("Mcp-Method", msg.Method)
		}
		if msg.Params.Name != "" {
			if headerSafe(msg.Params.Name) {
				req.Header.Set("Mcp-Name", msg.Params.Name)
			} else {
				req.Header.Set("Mcp-Name", b64Name(msg.Params.Name))
			}
		}
	}
	for k, v := range r.headers {
		switch {
		case k == "Host":
			req.Host = v
		case v == "":
			req.Header.Del(k)
		default:
			req.Header.Set(k, v)
		}
	}
	return req, nil
}

// headerSafe: printable ASCII only; anything else travels as a base64 sentinel.
func headerSafe(v string) bool {
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return false
		}
	}
	return v == strings.TrimSpace(v)
}

// send performs r with a bounded time and never fails the test itself.
func send(ctx context.Context, r rawReq) rawResp {
	start := time.Now()
	req, err := newRequest(ctx, r)
	if err != nil {
		return rawResp{err: err}
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return rawResp{err: err, elapsed: time.Since(start)}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	return rawResp{status: resp.StatusCode, header: resp.Header, body: b, elapsed: time.Since(start), err: err}
}

// do is send that fails the test on a transport error.
func do(t testing.TB, r rawReq) rawResp {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp := send(ctx, r)
	if resp.err != nil {
		t.Fatalf("%s %s: %v", r.method, r.url, resp.err)
	}
	return resp
}

// callResult is one tools/call as a client sees it.
type callResult struct {
	resp    rawResp
	msg     rpc
	ok      bool // a JSON-RPC message was decoded
	outcome outcomeMeta
}

func (c callResult) succeeded() bool {
	return c.resp.err == nil && c.resp.status == 200 && c.ok && c.msg.Result != nil && !c.msg.Result.IsError
}

// callTool makes one modern tools/call on a turn (url may point at any bridge).
func callTool(ctx context.Context, url, token, name, args string) callResult {
	resp := send(ctx, rawReq{url: url, token: token, body: modernCall(rpcID.Add(1), name, args), modern: true})
	c := callResult{resp: resp}
	if resp.err == nil {
		c.msg, c.ok = resp.rpc()
		c.outcome = c.msg.outcome()
	}
	return c
}

func (c callResult) String() string {
	if c.resp.err != nil {
		return "transport error: " + c.resp.err.Error()
	}
	return fmt.Sprintf("HTTP %d %s", c.resp.status, truncate(string(c.resp.body), 400))
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// mustCall calls and fails the test on anything but a decoded result.
func mustCall(t testing.TB, tr turn, name, args string) callResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := callTool(ctx, tr.URL, tr.Token, name, args)
	if !c.ok || c.msg.Result == nil {
		t.Fatalf("tools/call %s %s: %s", name, args, c)
	}
	return c
}

// expectOutcome checks status/code in both the _meta and the text prefix.
func expectOutcome(t testing.TB, c callResult, status, code string) {
	t.Helper()
	if c.msg.Result == nil {
		t.Fatalf("want a %s/%s result, got %s", status, code, c)
	}
	if status == "succeeded" {
		// Successes carry the handler's result; only refusals must carry the outcome _meta.
		if c.msg.Result.IsError || (c.outcome.Status != "" && c.outcome.Status != status) {
			t.Errorf("want a success, got %s", c)
		}
		return
	}
	if c.outcome.Status != status || c.outcome.Code != code {
		t.Errorf("outcome = %s/%s, want %s/%s (%s)", c.outcome.Status, c.outcome.Code, status, code, c)
	}
	if status == "denied" || status == "failed" {
		if !c.msg.Result.IsError || !strings.HasPrefix(c.msg.text(), status+":") {
			t.Errorf("refusal text %q (isError %v), want isError and a %q prefix", c.msg.text(), c.msg.Result.IsError, status+":")
		}
	}
}
