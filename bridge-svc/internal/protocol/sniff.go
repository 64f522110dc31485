package protocol

import (
	"bytes"
	"net/http"
	"strings"
)

// HeaderMethod carries the method of a 2026-07-28 request.
const HeaderMethod = "Mcp-Method"

// targets are the methods that are attempts on a turn — each leaves a
// record, refused or not (invariant 4) — and the params member naming what
// each asks for (mcpserver keeps the same three by CallKind).
var targets = map[string]string{"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}

// isAttempt reports whether method is one of them.
func isAttempt(method string) bool { return targets[method] != "" }

// Sniff says what a request the edge refused claims to be — its method and
// what it names (params.name of a tools/call or a prompts/get, params.uri of
// a resources/read) — so that the refusal of an attempt can be recorded
// under what it asked for. It is never used to serve anything: it reads
// leniently what Parse refused strictly (a truncated body, invalid UTF-8,
// duplicate or case-folded keys). The Mcp-Method and Mcp-Name headers, when
// present, say it first (any Mcp-Method value naming an attempt makes it
// that attempt: an intermediary may have read that one); then the body. A
// body whose top level names an attempt under any spelling of "method",
// anywhere among its members, is that attempt whatever the header or
// another "method" says — encoding/json would have read the last or a
// folded one — so its refusal is recorded.
// Empty strings when unknown.
func Sniff(h http.Header, body []byte) (method, name string) {
	method = h.Get(HeaderMethod)
	if v, ok := decodeHeaderValue(h.Get(HeaderName)); ok {
		name = v
	}
	bm, bn, bu := sniffBody(body)
	if m := AttemptMethod(h, bm); m != "" {
		method = m
	} else if method == "" {
		method = bm
	}
	if targets[method] == "uri" {
		bn = bu
	}
	if bn != "" {
		name = bn
	}
	return method, name
}

// sniffBody reads body's top level for "method" (the first value, or the
// first that names an attempt) and params for "name" and "uri" (the first
// of each); keys match as encoding/json matches them, case-folded. A
// truncated or otherwise broken body yields what came before the break.
// Values are skipped by a byte scan (the helpers Parse uses), so the whole
// body is read at once — a "method" after large arguments counts too —
// at the cost of a scan, not of a token decoder (≈ 8 MB/s).
func sniffBody(body []byte) (method, name, uri string) {
	// A byte order mark is no JSON (Parse refuses it), yet a request that
	// starts with one says what it is all the same: recorded as that.
	body = bytes.TrimPrefix(body, byteOrderMark)
	sniffMembers(body, func(key string, val []byte) {
		switch {
		case strings.EqualFold(key, "method"):
			if v, ok := sniffString(val); ok && (method == "" || (isAttempt(v) && !isAttempt(method))) {
				method = v
			}
		case strings.EqualFold(key, "params"):
			sniffMembers(val, func(key string, val []byte) {
				v, ok := sniffString(val)
				switch {
				case !ok:
				case strings.EqualFold(key, "name") && name == "":
					name = v
				case strings.EqualFold(key, "uri") && uri == "":
					uri = v
				}
			})
		}
	})
	return method, name, uri
}

// sniffMembers calls each for the members of the object b starts with, in
// order, until b ends or stops being an object.
func sniffMembers(b []byte, each func(key string, val []byte)) {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return
	}
	for i = skipWS(b, i+1); i < len(b) && b[i] == '"'; {
		end := stringEnd(b, i)
		key, ok := sniffString(b[i:end])
		if !ok {
			return
		}
		if i = skipWS(b, end); i >= len(b) || b[i] != ':' {
			return
		}
		i = skipWS(b, i+1)
		vEnd := valueEnd(b, i)
		each(key, b[i:vEnd])
		if i = skipWS(b, vEnd); i >= len(b) || b[i] != ',' {
			return
		}
		i = skipWS(b, i+1)
	}
}

// sniffString decodes a whole JSON string (closing quote included);
// invalid UTF-8 becomes U+FFFD, as encoding/json reads it.
func sniffString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	s, ok := str(raw)
	if !ok {
		return "", false
	}
	return strings.ToValidUTF8(s, "\ufffd"), true
}
