package protocol_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sharedos/toolshare/bridge-svc/internal/protocol"
)

func TestEdgeCheck(t *testing.T) {
	e := protocol.NewEdge(protocol.EdgeConfig{
		AllowedOrigins: []string{"https://app.example/"},
		AllowedHosts:   append(protocol.DefaultAllowedHosts, "bridge.internal"),
		MaxBodyBytes:   10,
	})
	req := func(method, host string, h map[string]string, body string) *http.Request {
		r := httptest.NewRequest(method, "http://x/turns/t/mcp", strings.NewReader(body))
		r.Host = host
		r.Header.Set("Content-Type", "application/json")
		for k, v := range h {
			r.Header.Set(k, v)
		}
		return r
	}
	cases := []struct {
		name string
		r    *http.Request
		want int // 0 = allowed
	}{
		{"loopback host with port", req("POST", "127.0.0.1:7480", nil, "{}"), 0},
		{"ipv6 loopback", req("POST", "[::1]:7480", nil, "{}"), 0},
		{"configured host, any case", req("POST", "Bridge.Internal", nil, "{}"), 0},
		{"foreign host", req("POST", "evil.example:7480", nil, "{}"), 403},
		{"empty host", req("POST", "", nil, "{}"), 403},
		{"allowed origin", req("POST", "localhost", map[string]string{"Origin": "HTTPS://app.example"}, "{}"), 0},
		{"foreign origin", req("POST", "localhost", map[string]string{"Origin": "https://evil.example"}, "{}"), 403},
		{"null origin", req("POST", "localhost", map[string]string{"Origin": "null"}, "{}"), 403},
		{"json with charset", req("POST", "localhost", map[string]string{"Content-Type": "application/json; charset=utf-8"}, "{}"), 0},
		{"text/plain", req("POST", "localhost", map[string]string{"Content-Type": "text/plain"}, "{}"), 415},
		{"no content type", req("POST", "localhost", map[string]string{"Content-Type": ""}, "{}"), 415},
		// The body's size is ReadBody's, once the turn is known.
		{"declared length over cap", req("POST", "localhost", nil, strings.Repeat("x", 11)), 0},
		{"GET passes to mcp-go", req("GET", "localhost", nil, ""), 0},
		{"PATCH", req("PATCH", "localhost", nil, ""), 405},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := e.Check(tc.r)
			got := 0
			if err != nil {
				got = err.Status
			}
			if got != tc.want {
				t.Errorf("Check = %v, want %d", err, tc.want)
			}
		})
	}
	// A body longer than its (absent) Content-Length claims is cut at the cap.
	r := req("POST", "localhost", nil, strings.Repeat("x", 11))
	r.ContentLength = -1
	if _, err := e.ReadBody(httptest.NewRecorder(), r); err == nil || err.Status != 413 {
		t.Errorf("ReadBody over cap = %v, want 413", err)
	}
	// A declared length over the cap is refused after a prefix at most.
	r = req("POST", "localhost", nil, strings.Repeat("x", 11))
	if b, err := e.ReadBody(httptest.NewRecorder(), r); err == nil || err.Status != 413 || len(b) > 11 {
		t.Errorf("ReadBody of a declared length over the cap = %q, %v, want 413", b, err)
	}
	r = req("POST", "localhost", nil, "{}")
	if b, err := e.ReadBody(httptest.NewRecorder(), r); err != nil || string(b) != "{}" {
		t.Errorf("ReadBody = %q, %v", b, err)
	}
}

// TestIsModern: the era of a version is mcp-go's word, which compares
// strings — "2026-07-28x" and the conformance suite's unsupported
// "v999.0.0" are modern to it, so they are to the bridge (it took them for
// 2025-era and refused the suite's v999.0.0 server/discover 400 for its
// missing session, where mcp-go owes an UnsupportedProtocolVersionError).
func TestIsModern(t *testing.T) {
	for v, want := range map[string]bool{"2026-07-28": true, "2027-01-01": true, "2025-11-25": false, "": false, "2026-07-28x": true,
		"v999.0.0": true, "1999-01-01": false} {
		if protocol.IsModern(v) != want {
			t.Errorf("IsModern(%q) != %v", v, want)
		}
	}
}

// TestOwnOrigins (issue 17, item 11): the bridge's own origin is always
// allowed — its public URL's, and on a loopback listener the loopback names
// with its port — while other ports and hosts stay foreign.
func TestOwnOrigins(t *testing.T) {
	pub, _ := url.Parse("http://127.0.0.1:7480/")
	loop := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7480}
	e := protocol.NewEdge(protocol.EdgeConfig{AllowedOrigins: protocol.OwnOrigins(pub, loop), AllowedHosts: protocol.DefaultAllowedHosts})
	for origin, want := range map[string]int{
		"http://localhost:7480": 0, "http://127.0.0.1:7480": 0, "http://[::1]:7480": 0, "HTTP://LOCALHOST:7480": 0,
		"http://localhost:7481": 403, "https://localhost:7480": 403, "http://evil.example:7480": 403, "null": 403,
	} {
		r := httptest.NewRequest("POST", "http://x/turns/t/mcp", strings.NewReader("{}"))
		r.Host = "localhost:7480"
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Origin", origin)
		got := 0
		if err := e.Check(r); err != nil {
			got = err.Status
		}
		if got != want {
			t.Errorf("Origin %s: %d, want %d", origin, got, want)
		}
	}
	// Behind a public URL on a pod IP only that origin is the bridge's own.
	pub, _ = url.Parse("https://tools.example.com")
	if got := protocol.OwnOrigins(pub, &net.TCPAddr{IP: net.IPv4(10, 0, 0, 7), Port: 7480}); len(got) != 1 || got[0] != "https://tools.example.com" {
		t.Errorf("OwnOrigins on a pod IP = %v", got)
	}
}

// TestASlowBodyIsNotWaitedFor: a body that does not come within the body
// read timeout ends its read (400), and a body that comes in time is read
// whole.
func TestASlowBodyIsNotWaitedFor(t *testing.T) {
	e := protocol.NewEdge(protocol.EdgeConfig{BodyReadTimeout: 2 * time.Second})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, herr := e.ReadBody(w, r)
		if herr != nil {
			w.Header().Set("Connection", "close")
			http.Error(w, herr.Reason, herr.Status)
			return
		}
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	ask := func(rest string) *http.Response {
		t.Helper()
		conn, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		if _, err := io.WriteString(conn, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\n"+rest); err != nil {
			t.Fatal(err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second)) // a bound on failure, not a wait
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("no answer: %v", err)
		}
		return resp
	}
	if resp := ask(""); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a body never sent: %d, want 400", resp.StatusCode)
	}
	resp := ask("ping")
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || string(b) != "ping" {
		t.Errorf("a body sent at once: %d %q", resp.StatusCode, b)
	}
}

// TestAnUnreadBodyIsNotWaitedFor: a request declaring a body it never sends
// is answered, and its connection closed once the body read timeout has
// passed, whether its handler refused it without reading (an unknown path,
// a refusal before the body) or its body read timed out; net/http alone
// would wait for the rest of the body for ever. A body read whole leaves
// the connection open for the next request, and a large body over the cap
// still gets its 413 (net/http reads none of it after the answer).
func TestAnUnreadBodyIsNotWaitedFor(t *testing.T) {
	serve := func(bodyRead time.Duration) string {
		e := protocol.NewEdge(protocol.EdgeConfig{BodyReadTimeout: bodyRead})
		mux := http.NewServeMux()
		mux.HandleFunc("/refused", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "bearer token required", http.StatusUnauthorized)
		})
		mux.HandleFunc("/read", func(w http.ResponseWriter, r *http.Request) {
			body, herr := e.ReadBody(w, r)
			if herr != nil {
				http.Error(w, herr.Reason, herr.Status)
				return
			}
			_, _ = w.Write(body)
		})
		srv := httptest.NewServer(e.BoundBody(mux))
		t.Cleanup(srv.Close)
		return srv.Listener.Addr().String()
	}
	dial := func(addr string) (net.Conn, *bufio.Reader) {
		t.Helper()
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second)) // a bound on failure, not a wait
		return conn, bufio.NewReader(conn)
	}
	ask := func(conn net.Conn, br *bufio.Reader, path, body string) *http.Response {
		t.Helper()
		if _, err := io.WriteString(conn, "POST "+path+" HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n"+body); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: no answer: %v", path, err)
		}
		_, _ = io.ReadAll(resp.Body)
		return resp
	}
	closed := func(br *bufio.Reader, what string) {
		t.Helper()
		if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
			t.Errorf("%s: the connection stayed open (%v)", what, err)
		}
	}
	short := serve(50 * time.Millisecond)
	for path, want := range map[string]int{"/refused": http.StatusUnauthorized, "/nothing": http.StatusNotFound} {
		conn, br := dial(short)
		if resp := ask(conn, br, path, "{"); resp.StatusCode != want {
			t.Errorf("%s: %d, want %d", path, resp.StatusCode, want)
		}
		closed(br, path)
	}
	conn, br := dial(short)
	if resp := ask(conn, br, "/read", "{"); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a body that never came: %d, want 400", resp.StatusCode)
	}
	closed(br, "a body that never came")

	long := serve(time.Hour)
	conn, br = dial(long)
	whole := strings.Repeat("x", 1000)
	for i := range 2 {
		if resp := ask(conn, br, "/read", whole); resp.StatusCode != http.StatusOK {
			t.Fatalf("a whole body, request %d on one connection: %d", i+1, resp.StatusCode)
		}
	}
}

// A client sending a body over the cap gets its 413 whole, never a reset
// connection: net/http reads nothing more of such a body after the answer
// and waits before it closes (TestAnUnreadBodyIsNotWaitedFor's bound must
// not change that).
func TestAnOversizeBodyGetsItsAnswer(t *testing.T) {
	e := protocol.NewEdge(protocol.EdgeConfig{MaxBodyBytes: 1 << 20})
	srv := httptest.NewServer(e.BoundBody(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, herr := e.ReadBody(w, r); herr != nil {
			http.Error(w, herr.Reason, herr.Status)
		}
	})))
	t.Cleanup(srv.Close)
	for i := range 20 {
		resp, err := http.Post(srv.URL, "application/json", strings.NewReader(strings.Repeat("x", 5<<20)))
		if err != nil {
			t.Fatalf("request %d: %v, want its 413", i+1, err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Fatalf("request %d: %d, want 413", i+1, resp.StatusCode)
		}
	}
}
