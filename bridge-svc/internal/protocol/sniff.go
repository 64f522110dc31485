package protocol

import (
	"bytes"
	"encoding/json"
	"net/http"
)

// HeaderMethod carries the method of a 2026-07-28 request.
const HeaderMethod = "Mcp-Method"

// maxSniffTokens bounds the JSON tokens Sniff reads: "method" and
// params.name are near the start of every message clients send.
const maxSniffTokens = 64

// Sniff says what a request the edge refused claims to be — its method and,
// for a tools/call, its tool name — so that the refusal of an attempt can be
// recorded under what it asked for. It is never used to serve anything: it
// reads leniently what Parse refused strictly (a truncated body, invalid
// UTF-8, duplicate keys: the first value wins). The Mcp-Method and Mcp-Name
// headers, when present, say it first; then the body's top level "method"
// and params "name" within the first tokens — and a body that names an
// attempt (tools/call, prompts/get, resources/read) is one whatever the
// header says, so its refusal is recorded (invariant 4). Empty strings
// when unknown.
func Sniff(h http.Header, body []byte) (method, name string) {
	method = h.Get(HeaderMethod)
	if v, ok := decodeHeaderValue(h.Get(HeaderName)); ok {
		name = v
	}
	bm, bn := sniffBody(body)
	if method == "" || bm == "tools/call" || bm == "prompts/get" || bm == "resources/read" {
		method = bm
	}
	if bn != "" {
		name = bn
	}
	return method, name
}

// sniffBody reads the first tokens of body for the top level "method" and
// params.name; a truncated or otherwise broken body yields what came before
// the break.
func sniffBody(body []byte) (method, name string) {
	dec := json.NewDecoder(bytes.NewReader(body))
	var objects []bool // per open container: whether it is an object
	var under []string // per open container: the key it was opened under
	key, wantKey := "", false
	for range maxSniffTokens {
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
			switch {
			case len(objects) == 1 && key == "method" && method == "":
				method = v
			case len(objects) == 2 && objects[1] && under[1] == "params" && key == "name" && name == "":
				name = v
			}
		}
		wantKey = len(objects) > 0 && objects[len(objects)-1]
	}
	return method, name
}
