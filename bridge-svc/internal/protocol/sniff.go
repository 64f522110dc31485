package protocol

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
)

// HeaderMethod carries the method of a 2026-07-28 request.
const HeaderMethod = "Mcp-Method"

// attempts are the methods that are attempts on a turn: each leaves a
// record, refused or not (invariant 4).
var attempts = []string{"tools/call", "prompts/get", "resources/read"}

// IsAttempt reports whether method is one of them.
func IsAttempt(method string) bool {
	for _, a := range attempts {
		if method == a {
			return true
		}
	}
	return false
}

// Sniff says what a request the edge refused claims to be — its method and
// what it names (params.name of a tools/call or a prompts/get, params.uri of
// a resources/read) — so that the refusal of an attempt can be recorded
// under what it asked for. It is never used to serve anything: it reads
// leniently what Parse refused strictly (a truncated body, invalid UTF-8,
// duplicate or case-folded keys). The Mcp-Method and Mcp-Name headers, when
// present, say it first; then the body. A body whose top level names an
// attempt under any spelling of "method", anywhere among its members, is
// that attempt whatever the header or another "method" says — encoding/json
// would have read the last or a folded one — so its refusal is recorded.
// Empty strings when unknown.
func Sniff(h http.Header, body []byte) (method, name string) {
	method = h.Get(HeaderMethod)
	if v, ok := decodeHeaderValue(h.Get(HeaderName)); ok {
		name = v
	}
	bm, bn, bu := sniffBody(body)
	if method == "" || IsAttempt(bm) {
		method = bm
	}
	if method == "resources/read" {
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
// The whole body is read (it is within the edge's body cap): a "method"
// after large arguments counts too.
func sniffBody(body []byte) (method, name, uri string) {
	dec := json.NewDecoder(bytes.NewReader(body))
	var objects []bool // per open container: whether it is an object
	var under []string // per open container: the key it was opened under
	key, wantKey := "", false
	for {
		t, err := dec.Token()
		if err != nil {
			break
		}
		if k, isStr := t.(string); wantKey && isStr {
			key, wantKey = k, false
			continue
		}
		switch v := t.(type) {
		case json.Delim:
			if v == '{' || v == '[' {
				objects, under = append(objects, v == '{'), append(under, key)
				wantKey = v == '{'
				continue
			}
			objects, under = objects[:len(objects)-1], under[:len(under)-1]
		case string:
			inParams := len(objects) == 2 && objects[1] && strings.EqualFold(under[1], "params")
			switch {
			case len(objects) == 1 && strings.EqualFold(key, "method"):
				if method == "" || (IsAttempt(v) && !IsAttempt(method)) {
					method = v
				}
			case inParams && strings.EqualFold(key, "name") && name == "":
				name = v
			case inParams && strings.EqualFold(key, "uri") && uri == "":
				uri = v
			}
		}
		wantKey = len(objects) > 0 && objects[len(objects)-1]
	}
	return method, name, uri
}
