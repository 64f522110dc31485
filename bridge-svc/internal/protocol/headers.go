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

// HeaderSessionID carries a 2025-era session's id.
const HeaderSessionID = "Mcp-Session-Id"

// NameHeaderMismatch returns why a modern tools/call's Mcp-Name header does
// not name the body's tool ("" when it does, or when the rule does not
// apply: another method, or a legacy-era request, which has no such header).
// A non-ASCII name travels as =?base64?<std base64>?= and is decoded first.
// Two Mcp-Method rules hold on any request, whatever its era: a repeated
// header is refused (mcp-go reads the first, an intermediary may read the
// last), and so is one naming an attempt (a tools/call, a prompts/get, a
// resources/read) the body's method is not — an intermediary routing on it
// took the request for that attempt, and mcp-go refuses it only on a
// 2026-07-28 request that is not a notification. Either is a refused
// attempt when the header names one (AttemptMethod): recorded. So is a
// repeated Mcp-Protocol-Version or Mcp-Session-Id, for the same reason:
// the bridge and mcp-go read the first, a proxy may read the last.
func NameHeaderMismatch(h http.Header, msg *Message) string {
	for _, k := range []string{HeaderMethod, HeaderProtocolVersion, HeaderSessionID} {
		if len(h.Values(k)) > 1 {
			return fmt.Sprintf("%s header repeated for %s", k, msg.Method)
		}
	}
	if m := h.Get(HeaderMethod); isAttempt(m) && m != msg.Method {
		return fmt.Sprintf("%s header %q does not match method %q", HeaderMethod, m, msg.Method)
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

// AttemptMethod says which attempt a request is by what it says of itself
// (invariant 4): method, its body's, when that is an attempt, else the
// first of its Mcp-Method header's values that is one; "" when neither
// says so. Sniff reads a refused body by the same rule.
func AttemptMethod(h http.Header, method string) string {
	if isAttempt(method) {
		return method
	}
	for _, v := range h.Values(HeaderMethod) {
		if isAttempt(v) {
			return v
		}
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
