package protocol

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
)

// HeaderName carries the tool name of a 2026-07-28 tools/call, so that a
// load balancer can route on it; the server must refuse a request whose
// header and body disagree (the balancer routed one tool, the body runs
// another).
const HeaderName = "Mcp-Name"

// CodeHeaderMismatch is the JSON-RPC error of a header/body disagreement.
const CodeHeaderMismatch = -32020

// NameHeaderMismatch returns why a modern tools/call's Mcp-Name header does
// not name the body's tool ("" when it does, or when the rule does not
// apply: another method, or a legacy-era request, which has no such header).
// A non-ASCII name travels as =?base64?<std base64>?= and is decoded first.
// A repeated Mcp-Method header is refused on any request: mcp-go reads the
// first, an intermediary may read the last.
func NameHeaderMismatch(h http.Header, msg *Message) string {
	if len(h.Values(HeaderMethod)) > 1 {
		return fmt.Sprintf("%s header repeated for %s", HeaderMethod, msg.Method)
	}
	param := "params." + targets[msg.Method]
	if !isAttempt(msg.Method) || !(IsModern(h.Get(HeaderProtocolVersion)) || IsModern(msg.MetaProtocolVersion)) {
		return ""
	}
	vals := h.Values(HeaderName)
	switch {
	case len(vals) == 0:
		return fmt.Sprintf("%s header missing for %s of %q", HeaderName, msg.Method, msg.Target)
	case len(vals) > 1:
		return fmt.Sprintf("%s header repeated for %s of %q", HeaderName, msg.Method, msg.Target)
	}
	name, ok := decodeHeaderValue(vals[0])
	if !ok {
		return fmt.Sprintf("%s header %q is not a valid =?base64?...?= value", HeaderName, vals[0])
	}
	if name != msg.Target {
		return fmt.Sprintf("%s header %q does not match %s %q", HeaderName, name, param, msg.Target)
	}
	return ""
}

func decodeHeaderValue(v string) (string, bool) {
	if !strings.HasPrefix(v, "=?base64?") {
		return v, true
	}
	inner, ok := strings.CutSuffix(strings.TrimPrefix(v, "=?base64?"), "?=")
	if !ok {
		return "", false
	}
	b, err := base64.StdEncoding.DecodeString(inner)
	if err != nil {
		return "", false
	}
	return string(b), true
}
