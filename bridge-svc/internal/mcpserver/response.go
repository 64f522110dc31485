package mcpserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/server"

	"github.com/sharedos/toolshare/bridge-svc/internal/protocol"
)

// errCancelled is what a tool handler returns for a cancelled call; the
// response writer makes sure it never reaches the client.
var errCancelled = errors.New("call cancelled")

// errReplaced is what a tool handler returns when the request is answered
// with a protocol error of the bridge's own (callState.replaced).
var errReplaced = errors.New("answered with a protocol error")

// response is the writer mcp-go answers one request on. Once the request's
// call was cancelled — by the client's notifications/cancelled (2025 eras)
// or by the kernel (the turn closed) — nothing more is sent for it (MCP:
// the receiver of a cancellation does not respond; ARCHITECTURE.md's
// outcome table): a request's POST must be answered with JSON or an event
// stream, so it becomes an event stream that ends without an event, and
// whatever mcp-go writes after is dropped. A client that closed the
// request is not written to by mcp-go at all.
//
// A tools/call that mcp-go answers before its tool handler ran is a
// refusal (a header check, the session, the params): that answer is held
// until route has recorded the attempt (refusal, release), so no client
// ever sees an answer its record does not back yet.
//
// Progress of a running call is written by the bridge itself (event): the
// response becomes an event stream and mcp-go's answer, written as JSON,
// is sent as that stream's last event.
type response struct {
	w       http.ResponseWriter
	flusher http.Flusher
	st      *callState
	call    bool

	mu sync.Mutex
	// events: the bridge turned the response into an event stream; its own
	// (mcp-go's) answer is framed as one more event.
	events bool
	// mcpEvents: mcp-go itself answers as an event stream.
	mcpEvents bool

	wroteHeader bool
	silenced    bool
	status      int
	held        bool
	body        []byte
}

var _ server.HTTPResponseWriter = (*response)(nil)

// answered reports whether anything of an answer was written or held.
func (r *response) answered() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.wroteHeader || r.held
}

func newResponse(w http.ResponseWriter, st *callState, call bool) *response {
	f, _ := w.(http.Flusher)
	return &response{w: w, flusher: f, st: st, call: call}
}

// silent reports (with r.mu held) whether the answer is dropped, switching
// the response to an empty event stream the first time.
func (r *response) silent() bool {
	if r.silenced {
		return true
	}
	if rerr := r.replacement(); rerr != nil {
		// The bridge's JSON-RPC error instead of mcp-go's answer, with the
		// status mcp-go gives its own in the request's era, or as the
		// last event when progress went out first.
		r.silenced = true
		if !r.wroteHeader {
			h := r.w.Header()
			h.Del(server.HeaderKeySessionID)
			h.Set("Content-Type", "application/json")
			r.w.WriteHeader(protocol.ErrorStatus(r.st.modern, rerr.Code))
			r.wroteHeader = true
			_, _ = r.w.Write(rerr.Body())
		} else if r.events {
			_, _ = r.w.Write(sseEvent(rerr.Body()))
		}
		return true
	}
	if r.st == nil || !r.st.cancelled.Load() {
		return false
	}
	r.silenced = true
	if !r.wroteHeader {
		h := r.w.Header()
		h.Del(server.HeaderKeySessionID)
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		r.w.WriteHeader(http.StatusOK)
		r.wroteHeader = true
	}
	return true
}

// event writes msg, one JSON-RPC message about the request (a progress
// notification), on the request's own stream ahead of its answer; false
// when nothing more may be sent (cancelled, or the answer has begun).
func (r *response) event(msg []byte) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.silent() || r.mcpEvents || (r.wroteHeader && !r.events) {
		return false
	}
	if !r.wroteHeader {
		h := r.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		r.w.WriteHeader(http.StatusOK)
		r.wroteHeader, r.status, r.events = true, http.StatusOK, true
	}
	if _, err := r.w.Write(sseEvent(msg)); err != nil {
		return false
	}
	r.Flush()
	return true
}

func (r *response) replacement() *protocol.RPCError {
	if r.st == nil {
		return nil
	}
	return r.st.replaced.Load()
}

func sseEvent(msg []byte) []byte {
	b := make([]byte, 0, len(msg)+24)
	b = append(b, "event: message\ndata: "...)
	b = append(b, bytes.TrimSpace(msg)...)
	return append(b, "\n\n"...)
}

// Header implements server.HTTPResponseWriter.
func (r *response) Header() http.Header { return r.w.Header() }

// WriteHeader implements server.HTTPResponseWriter.
func (r *response) WriteHeader(status int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.silent() || r.wroteHeader {
		return
	}
	r.mcpEvents = strings.HasPrefix(r.w.Header().Get("Content-Type"), "text/event-stream")
	r.wroteHeader, r.status = true, status
	if r.call && !r.st.handled.Load() {
		r.held = true
		return
	}
	r.w.WriteHeader(status)
}

// Write implements server.HTTPResponseWriter.
func (r *response) Write(p []byte) (int, error) {
	r.mu.Lock()
	silent, events, wrote := r.silent(), r.events, r.wroteHeader
	r.mu.Unlock()
	if silent {
		return len(p), nil
	}
	if events {
		// mcp-go's JSON answer (one Write per message) after our events.
		if _, err := r.w.Write(sseEvent(p)); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	if !wrote {
		r.WriteHeader(http.StatusOK)
	}
	if r.held {
		r.body = append(r.body, p...)
		return len(p), nil
	}
	return r.w.Write(p)
}

// release sends a held answer.
func (r *response) release() {
	if r.held {
		r.held = false
		r.w.WriteHeader(r.status)
		_, _ = r.w.Write(r.body)
	}
}

// refusal says why mcp-go refused the request, from what it answered: the
// JSON-RPC error's code and message (in a JSON body or an event), else the
// HTTP status and its text. Quoted parts of the message are dropped: mcp-go
// quotes header values there, and an Mcp-Param-* header carries an
// argument, which a record holds only as a digest (invariant 11).
func (r *response) refusal() string {
	body := bytes.TrimSpace(r.body)
	if i := bytes.Index(body, []byte("data: ")); i >= 0 {
		body = body[i+len("data: "):]
	}
	var m struct {
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if dec.Decode(&m) == nil && m.Error != nil {
		return fmt.Sprintf("refused by the MCP server (JSON-RPC %d): %s", m.Error.Code, unquote(m.Error.Message))
	}
	if len(body) > 512 {
		body = body[:512]
	}
	return fmt.Sprintf("refused by the MCP server (HTTP %d): %s", r.status, unquote(strings.ToValidUTF8(string(body), "\uFFFD")))
}

var (
	quoted = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	// number is a value encoding/json names in its errors without double
	// quotes: "cannot unmarshal number 4111222333e300 into …", "invalid
	// character 'x'" (one character, or an escape such as '\n').
	number = regexp.MustCompile(`\bnumber -?[0-9][^\s"]*|'(?:[^'\\\s]|\\\S[^\s']{0,4})'`)
)

// unquote replaces each double-quoted part of s by "…", and each value
// encoding/json quotes without double quotes (a number, a character): an
// argument the request's parse failed on, which a record holds only as a
// digest (invariant 11).
func unquote(s string) string {
	s = quoted.ReplaceAllLiteralString(strings.TrimSpace(s), `"…"`)
	return number.ReplaceAllStringFunc(s, func(m string) string {
		if strings.HasPrefix(m, "number ") {
			return "number …"
		}
		return "'…'"
	})
}

// Flush implements server.HTTPResponseWriter.
func (r *response) Flush() {
	if r.flusher != nil && !r.held {
		r.flusher.Flush()
	}
}

// CanStream implements server.HTTPResponseWriter.
func (r *response) CanStream() bool { return r.flusher != nil }

// discard is the writer of a request the bridge makes of its own turn
// server (forgetting a session): nobody reads the answer.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header {
	if d.h == nil {
		d.h = http.Header{}
	}
	return d.h
}
func (*discard) WriteHeader(int)             {}
func (*discard) Write(p []byte) (int, error) { return len(p), nil }
func (*discard) Flush()                      {}
func (*discard) CanStream() bool             { return false }
