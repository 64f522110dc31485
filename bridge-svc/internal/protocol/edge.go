package protocol

import (
	"errors"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// DefaultMaxBodyBytes caps a request body (4 MiB).
const DefaultMaxBodyBytes = 4 << 20

// EdgeConfig is what the edge checks are made of.
type EdgeConfig struct {
	// AllowedOrigins are exact origins ("https://app.example"); a request
	// without an Origin header (a non-browser client) is allowed, any other
	// Origin (including "null") is 403.
	AllowedOrigins []string
	// AllowedHosts are host names (no port) a request's Host may name; the
	// check applies on every socket, not only loopback (DNS rebinding to a
	// pod IP is the same attack).
	AllowedHosts []string
	// MaxBodyBytes caps a POST body; 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// BodyReadTimeout bounds reading a POST body once its headers are in;
	// 0 means DefaultBodyReadTimeout.
	BodyReadTimeout time.Duration
}

// DefaultBodyReadTimeout is how long a client has to send a body whose
// headers came: a client that declares a body and sends it slowly, or
// never, does not hold its connection longer.
const DefaultBodyReadTimeout = 30 * time.Second

// DefaultAllowedHosts are the loopback names.
var DefaultAllowedHosts = []string{"localhost", "127.0.0.1", "::1"}

// OwnOrigins are the bridge's own origins, always allowed: the public URL's,
// and when the endpoint listens on loopback, the loopback names with its
// port (a page of the server's own origin is no cross-site request; the
// MCP conformance suite's DNS-rebinding scenario sends exactly this).
func OwnOrigins(publicURL *url.URL, listen net.Addr) []string {
	out := []string{publicURL.Scheme + "://" + publicURL.Host}
	if tcp, ok := listen.(*net.TCPAddr); ok && tcp.IP.IsLoopback() {
		port := strconv.Itoa(tcp.Port)
		for _, h := range DefaultAllowedHosts {
			out = append(out, "http://"+net.JoinHostPort(h, port))
		}
	}
	return out
}

// Edge applies the checks that need no lease: run before any lease lookup.
type Edge struct {
	origins  map[string]bool
	hosts    map[string]bool
	maxBody  int64
	bodyRead time.Duration
}

// NewEdge returns an Edge; origins and hosts compare case-insensitively.
func NewEdge(cfg EdgeConfig) *Edge {
	e := &Edge{origins: map[string]bool{}, hosts: map[string]bool{}, maxBody: cfg.MaxBodyBytes, bodyRead: cfg.BodyReadTimeout}
	if e.maxBody <= 0 {
		e.maxBody = DefaultMaxBodyBytes
	}
	if e.bodyRead <= 0 {
		e.bodyRead = DefaultBodyReadTimeout
	}
	for _, o := range cfg.AllowedOrigins {
		e.origins[strings.ToLower(strings.TrimRight(o, "/"))] = true
	}
	for _, h := range cfg.AllowedHosts {
		e.hosts[strings.ToLower(strings.Trim(h, "[]"))] = true
	}
	return e
}

// MaxBodyBytes is the effective body cap.
func (e *Edge) MaxBodyBytes() int64 { return e.maxBody }

// HTTPError is a refusal at the edge: the status and a short reason.
type HTTPError struct {
	Status int
	Reason string
}

func (e *HTTPError) Error() string { return strconv.Itoa(e.Status) + " " + e.Reason }

// Check validates Host, Origin, method and Content-Type. The body's size is
// ReadBody's, after the turn is known: a refused oversize attempt on a live
// turn is recorded.
func (e *Edge) Check(r *http.Request) *HTTPError {
	if !e.hostAllowed(r.Host) {
		return &HTTPError{http.StatusForbidden, "host not allowed"}
	}
	if origin, ok := r.Header["Origin"]; ok {
		if len(origin) != 1 || !e.origins[strings.ToLower(strings.TrimRight(origin[0], "/"))] {
			return &HTTPError{http.StatusForbidden, "origin not allowed"}
		}
	}
	switch r.Method {
	case http.MethodPost:
		mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || mt != "application/json" {
			// A browser "simple request" (text/plain) must never execute.
			return &HTTPError{http.StatusUnsupportedMediaType, "Content-Type must be application/json"}
		}
	case http.MethodGet, http.MethodDelete:
	default:
		return &HTTPError{http.StatusMethodNotAllowed, "method not allowed"}
	}
	return nil
}

// AllowedMethods is the Allow header of a 405 on the endpoint (RFC 9110:
// MUST), for the era h's Mcp-Protocol-Version names: a 2026-07-28 request
// is a POST, nothing else; a 2025-era client also ends its session with
// DELETE. GET is never listed: no era gets a standalone stream from a turn
// (nothing is pushed; its catalogue is pinned).
func AllowedMethods(h http.Header) string {
	if IsModern(h.Get(HeaderProtocolVersion)) {
		return http.MethodPost
	}
	return http.MethodPost + ", " + http.MethodDelete
}

func (e *Edge) hostAllowed(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.ToLower(strings.Trim(host, "[]"))
	return host != "" && e.hosts[host]
}

// sniffPrefix is what ReadBody reads of a body whose declared length is
// over the cap, for the refusal's record (Sniff).
const sniffPrefix = 1024

// ReadBody reads a POST body under the cap; a longer body is a 413, and one
// whose Content-Length is over the cap is refused after its first
// sniffPrefix bytes; one not sent within the body read timeout is a 400.
// With an error, the bytes read come back too, for the record of the
// refused attempt only (Sniff), never to be served.
func (e *Edge) ReadBody(w http.ResponseWriter, r *http.Request) ([]byte, *HTTPError) {
	// The read has a deadline of its own (the server's is for headers
	// only: an SSE stream must not end with one), lifted once the body is
	// in. A failed read keeps it: what net/http still reads of the body
	// after the answer ends there too (BoundBody).
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(e.bodyRead))
	if r.ContentLength > e.maxBody {
		prefix, _ := io.ReadAll(io.LimitReader(r.Body, sniffPrefix))
		return prefix, &HTTPError{http.StatusRequestEntityTooLarge, "request body too large"}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, e.maxBody))
	if err == nil {
		_ = rc.SetReadDeadline(time.Time{})
	}
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return body, &HTTPError{http.StatusRequestEntityTooLarge, "request body too large"}
		}
		return body, &HTTPError{http.StatusBadRequest, "could not read request body"}
	}
	return body, nil
}

// BoundBody bounds what a request's unread body costs: the server's own
// deadline is for headers only, and net/http waits for the rest of a body
// its handler left unread (up to 256 KiB) before it answers or closes —
// for ever, when a client declares a body and never sends it. So a request
// with a body has the body read timeout from its start: ReadBody sets its
// own and lifts it once the body is in; a refusal before the body (401,
// 404, an unknown path), or a body read that failed, leaves the deadline,
// and what net/http still reads of the body ends there. (The request's
// Body is left as it is: net/http tells by its type how much is unread.)
func (e *Edge) BoundBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			// No body: the server already reads ahead on the connection
			// (to see the client go), which a deadline would cut.
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(e.bodyRead))
		}
		next.ServeHTTP(w, r)
	})
}

// HostOf returns the host name of a URL, for the allowed-hosts default.
func HostOf(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return ""
	}
	return u.Hostname()
}
