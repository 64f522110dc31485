package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
)

// A tools/call reaches its upstream with the arguments' bytes as the
// kernel authorized them (ADR 0019 item 2). mcp-go's transports write a
// request as json.Marshal makes it, which compacts embedded JSON and
// escapes <, >, & and U+2028/U+2029: the same value, other bytes. So a
// call whose arguments json.Marshal would change registers the request as
// mcp-go will write it (wire) with the request as it is to go (exact), and
// the connection's HTTP round tripper and stdio writer send exact in its
// place. A body no call registered passes as it is.
type exactBodies struct {
	n  atomic.Int32 // how many are registered: none, and nothing is looked up
	mu sync.Mutex
	m  map[string][]byte // wire → exact
}

// marshalChanges reports whether json.Marshal writes the valid JSON args
// otherwise: whitespace outside strings, or a character it escapes.
func marshalChanges(args []byte) bool {
	inString, escaped := false, false
	for i, c := range args {
		switch {
		case c == '<' || c == '>' || c == '&':
			return true
		case c == 0xE2 && i+2 < len(args) && args[i+1] == 0x80 && (args[i+2] == 0xA8 || args[i+2] == 0xA9): // U+2028, U+2029
			return true
		case inString && escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		case !inString && (c == ' ' || c == '\t' || c == '\r' || c == '\n'):
			return true
		}
	}
	return false
}

// oneLine is args for a stdio server, whose messages are delimited by
// newlines and must not contain any (the MCP stdio transport): a raw CR or
// LF — in valid JSON only ever whitespace between tokens — would end the
// message there and make what follows a message of its own, one the kernel
// never authorized. Each becomes a space: the same JSON value, the same
// length, every other byte as it was (ADR 0019 item 2).
func oneLine(args []byte) []byte {
	if !bytes.ContainsAny(args, "\r\n") {
		return args
	}
	out := bytes.Clone(args)
	for i, c := range out {
		if c == '\r' || c == '\n' {
			out[i] = ' '
		}
	}
	return out
}

// exactRequest is req's bytes with params written as exactParams, and the
// bytes mcp-go writes for req; ok is false when they are the same, or when
// req's bytes do not end in its params as this expects.
func exactRequest(req any, params, exactParams []byte) (wire, exact []byte, ok bool) {
	wire, err := json.Marshal(req)
	if err != nil || len(wire) == 0 || wire[len(wire)-1] != '}' || !bytes.HasSuffix(wire[:len(wire)-1], params) {
		return nil, nil, false
	}
	head := wire[:len(wire)-len(params)-1]
	exact = append(append(append(make([]byte, 0, len(head)+len(exactParams)+1), head...), exactParams...), '}')
	return wire, exact, !bytes.Equal(wire, exact)
}

// add registers exact to go in place of wire until release.
func (e *exactBodies) add(wire, exact []byte) (release func()) {
	key := string(wire)
	e.mu.Lock()
	if e.m == nil {
		e.m = map[string][]byte{}
	}
	e.m[key] = exact
	e.n.Add(1)
	e.mu.Unlock()
	return func() {
		e.mu.Lock()
		delete(e.m, key)
		e.n.Add(-1)
		e.mu.Unlock()
	}
}

// hasLen reports whether a registered wire body is n bytes long: a body
// of another length is not read again to be looked up.
func (e *exactBodies) hasLen(n int64) bool {
	if e.n.Load() == 0 {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for wire := range e.m {
		if int64(len(wire)) == n {
			return true
		}
	}
	return false
}

// exactOf is what goes in place of body, if a call registered it.
func (e *exactBodies) exactOf(body []byte) ([]byte, bool) {
	if e.n.Load() == 0 {
		return nil, false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	exact, ok := e.m[string(body)]
	return exact, ok
}

// exactTransport sends a registered request's exact body over HTTP.
type exactTransport struct {
	next   http.RoundTripper
	bodies *exactBodies
}

func (t exactTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.roundTrip(req)
	if req.Method == http.MethodPost {
		if p, ok := req.Context().Value(postedKey{}).(*posted); ok {
			p.record(resp, err)
		}
	}
	return resp, err
}

func (t exactTransport) roundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodPost || req.GetBody == nil || !t.bodies.hasLen(req.ContentLength) {
		return t.next.RoundTrip(req)
	}
	r, err := req.GetBody() // a fresh reader of the bytes mcp-go wrote
	if err != nil {
		return t.next.RoundTrip(req)
	}
	body, err := io.ReadAll(r)
	if err != nil {
		return t.next.RoundTrip(req)
	}
	exact, ok := t.bodies.exactOf(body)
	if !ok {
		return t.next.RoundTrip(req)
	}
	if req.Body != nil {
		_ = req.Body.Close()
	}
	out := req.Clone(req.Context())
	out.Body, out.ContentLength = io.NopCloser(bytes.NewReader(exact)), int64(len(exact))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(exact)), nil }
	return t.next.RoundTrip(out)
}

// exactWriter sends a registered request's exact line to a stdio server
// (mcp-go writes each message as one line, in one Write).
type exactWriter struct {
	io.WriteCloser
	bodies *exactBodies
}

func (w exactWriter) Write(p []byte) (int, error) {
	if n := len(p); n > 0 && p[n-1] == '\n' {
		if exact, ok := w.bodies.exactOf(p[:n-1]); ok {
			if bytes.ContainsAny(exact, "\r\n") { // never: callTool sends oneLine's
				return 0, errors.New("upstream: a stdio message must be one line")
			}
			if _, err := w.WriteCloser.Write(append(exact[:len(exact):len(exact)], '\n')); err != nil {
				return 0, err
			}
			return n, nil
		}
	}
	return w.WriteCloser.Write(p)
}

// posted is what became of the POSTs one request went out in (the HTTP
// transport records them): what notRun reads to tell a request the
// upstream refused unrun from one it may have run.
type posted struct {
	mu     sync.Mutex
	n      int
	status int // the first POST's HTTP status; 0: no answer
}

type postedKey struct{}

// withPosted is ctx carrying a record of its request's POSTs.
func withPosted(ctx context.Context) (context.Context, *posted) {
	p := &posted{}
	return context.WithValue(ctx, postedKey{}, p), p
}

// record keeps the first POST's answer: the request's own. A later one in
// the same context is another message — the answer to a request the
// upstream sent on the call's stream (a ping, an elicitation) — whose 404
// says nothing of whether the call ran.
func (p *posted) record(resp *http.Response, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n++; p.n > 1 {
		return
	}
	if err == nil && resp != nil {
		p.status = resp.StatusCode
	}
}

// refusedUnrun: no POST went out (the session had ended before it), or
// the request's own was answered 404 (a session the upstream does not
// know), 400 (one it refuses; the SDKs answer so before dispatching) or
// 401 (a credential it refuses, before any handler): an answer before
// the request ran. Any other answer — 2xx and a stream that broke after,
// a 5xx, none — may follow its run.
func (p *posted) refusedUnrun() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n == 0 || p.status == http.StatusNotFound || p.status == http.StatusBadRequest || p.status == http.StatusUnauthorized
}
