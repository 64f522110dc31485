package protocol

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/sharedos/toolshare/services/contract/jsonlimits"
	"github.com/sharedos/toolshare/services/contract/resourceuri"
)

// JSON-RPC error codes the pre-parse answers with.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	// CodeMissingCapability (2026-07-28): the request needs a client
	// capability the client did not declare; data.requiredCapabilities
	// names them.
	CodeMissingCapability = -32021
)

// MaxDepth bounds the nesting of a message (arrays and objects), far below
// encoding/json's 10,000: deep nesting is a cheap DoS on every later parser.
const MaxDepth = jsonlimits.MaxDepth

// MaxMetaBytes bounds params._meta. mcp-go decodes it into a map[string]any
// about five times per request (the era's detection, the protocol info,
// the message, the method's params, a notification's own path): a 4 MiB
// _meta of empty objects cost 830 MB and a second of CPU. What clients put
// there — a progress token, a traceparent, a few ids, the 2026-07-28
// version and client capabilities — fits many times over.
const MaxMetaBytes = 64 << 10

// MaxValues and MaxContainers bound the JSON values of a request's params
// (of a response: of the whole message), and among them the objects and
// arrays. mcp-go decodes params into map[string]any and []any, each value
// costing 50 to 160 bytes per decoding (a 4 MiB array of ones: 208 MB, of
// empty objects: 224 MB), where a string costs about its bytes. A long
// array of numbers still fits — the 1 MiB of arguments the kernel takes
// (jsonlimits.MaxArgumentsBytes), of numbers of three digits or more — and
// a long string has no bound but the body's.
const (
	MaxValues     = 1 << 18
	MaxContainers = 1 << 16
)

// Message is what the pre-parse learned about one JSON-RPC message.
type Message struct {
	Method string
	// ID is the raw id ("" when absent).
	ID json.RawMessage
	// MetaProtocolVersion is params._meta["io.modelcontextprotocol/protocolVersion"].
	MetaProtocolVersion string
	// ToolName is params.name of a tools/call.
	ToolName string
	// Target is what a request names: params.name of a tools/call or a
	// prompts/get, params.uri of a resources/read, resources/subscribe or
	// resources/unsubscribe ("" otherwise).
	Target string
	// TraceMeta holds the W3C traceparent of params._meta (MCP SEP-414;
	// its tracestate and baggage are not taken from a harness,
	// mcpserver.traceparentOnly), for a harness whose
	// MCP client cannot set HTTP headers; nil when there are none. Only
	// string values are kept.
	TraceMeta map[string]string
	// Result and Error are a response's members, raw (a client answering a
	// server-to-client request of a 2025-era session).
	Result, Error json.RawMessage
	// InputResponses is params.inputResponses as sent (an object whose
	// members are objects: Parse refuses anything else); nil when absent.
	InputResponses json.RawMessage
	// RequestState is params.requestState (a string); HasRequestState
	// tells an empty one from none.
	RequestState    string
	HasRequestState bool
	// ClientCapabilities are the member names of
	// params._meta["io.modelcontextprotocol/clientCapabilities"] (2026-07-28
	// declares them per request) or, on an initialize, of
	// params.capabilities (2025 eras declare them per session); nil when
	// the request carries none.
	ClientCapabilities []string
}

// MetaClientCapabilities is the _meta key of a 2026-07-28 request's
// declared client capabilities.
const MetaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"

// TraceMetaKeys are the params._meta keys of SEP-414's W3C trace context
// the bridge takes.
var TraceMetaKeys = []string{"traceparent"}

// IsNotification reports a message with a method and no id.
func (m *Message) IsNotification() bool { return m.Method != "" && len(m.ID) == 0 }

// RPCError is a JSON-RPC error the edge answers itself.
type RPCError struct {
	Code    int
	Message string
	// ID is the request id when one could be read, else null.
	ID json.RawMessage
	// Data is the error's data member, when it has one.
	Data any
}

func (e *RPCError) Error() string { return e.Message }

// Body renders the JSON-RPC error response.
func (e *RPCError) Body() []byte {
	id := e.ID
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Data    any    `json:"data,omitempty"`
		} `json:"error"`
	}{JSONRPC: "2.0", ID: id, Error: struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Data    any    `json:"data,omitempty"`
	}{e.Code, e.Message, e.Data}})
	return b
}

var topKeys = []string{"jsonrpc", "id", "method", "params", "result", "error"}

// paramKeys are the params members MCP defines for the methods a tools-only
// server answers; a case-folded spelling of one is refused.
var paramKeys = []string{
	"name", "arguments", "_meta", "cursor", "protocolVersion", "capabilities", "clientInfo",
	"requestId", "reason", "uri", "level", "task", "progressToken", "inputResponses", "requestState",
	"ref", "argument", "context",
}

// byteOrderMark is UTF-8's.
var byteOrderMark = []byte("\xEF\xBB\xBF")

// Parse checks one JSON-RPC message strictly: valid UTF-8, one object (no
// batch), bounded depth, no duplicate or case-folded keys at the top level or
// in params (encoding/json would match "Method" or "paramſ" to the real
// field, so what an intermediary sees and what mcp-go executes could differ),
// "jsonrpc":"2.0", and an id that is a string or a number whenever the
// message is not a notification — a null or missing id never turns a
// request into a notification; a numeric id must be an integer within
// ±2^53 (what mcp-go's float64 answers under the same id). No key repeats
// in params._meta, nor, folded, among the client capabilities. What mcp-go
// decodes into maps is bounded: params._meta to MaxMetaBytes, params to
// MaxValues and MaxContainers (-32602; a response's whole message, -32600).
func Parse(body []byte) (*Message, *RPCError) {
	if !utf8.Valid(body) {
		return nil, &RPCError{Code: CodeParseError, Message: "parse error: body is not valid UTF-8"}
	}
	if bytes.HasPrefix(body, byteOrderMark) {
		return nil, &RPCError{Code: CodeParseError, Message: "parse error: a byte order mark before the message (JSON text has none)"}
	}
	// JSON's own whitespace only: what else a Unicode trim would take (a
	// no-break space, U+0085) mcp-go's decoder refuses.
	trimmed := bytes.Trim(body, " \t\r\n")
	if len(trimmed) == 0 {
		return nil, &RPCError{Code: CodeParseError, Message: "parse error: empty body"}
	}
	if trimmed[0] == '[' {
		return nil, &RPCError{Code: CodeInvalidRequest, Message: "invalid request: JSON-RPC batches are not supported"}
	}
	if trimmed[0] != '{' {
		return nil, &RPCError{Code: CodeInvalidRequest, Message: "invalid request: a message must be a JSON object"}
	}
	// Depth first: it is a byte scan with a fixed cap, and encoding/json
	// gives up at 10,000 levels with a generic error, which would hide the
	// rule the request broke.
	if d, ok := jsonlimits.Scan(trimmed, MaxDepth); d > MaxDepth {
		return nil, &RPCError{Code: CodeInvalidRequest, Message: "invalid request: nesting deeper than 64"}
	} else if !ok {
		return nil, &RPCError{Code: CodeParseError, Message: "parse error: malformed JSON"}
	}
	if !json.Valid(trimmed) {
		return nil, &RPCError{Code: CodeParseError, Message: "parse error: malformed JSON"}
	}
	top, err := members(trimmed)
	if err != nil {
		return nil, &RPCError{Code: CodeParseError, Message: "parse error: malformed JSON"}
	}
	id := top.get("id")
	fail := func(msg string) (*Message, *RPCError) {
		e := &RPCError{Code: CodeInvalidRequest, Message: "invalid request: " + msg}
		if validID(id) {
			e.ID = id
		}
		return nil, e
	}
	if msg := top.check(topKeys, "top level"); msg != "" {
		return fail(msg)
	}
	if version, ok := str(top.get("jsonrpc")); !ok || version != "2.0" {
		return fail(`"jsonrpc" must be "2.0"`)
	}
	m := &Message{}
	if raw, ok := top.lookup("method"); ok {
		var ok bool
		if m.Method, ok = str(raw); !ok || m.Method == "" {
			return fail(`"method" must be a non-empty string`)
		}
	}
	if raw, ok := top.lookup("id"); ok {
		if bytes.Equal(raw, []byte("null")) {
			return fail(`"id" must not be null`)
		}
		if !validID(raw) {
			return fail(`"id" must be a string or an integer within ±2^53 (no fraction, no exponent)`)
		}
		m.ID = raw
	}
	switch {
	case m.Method == "":
		// A client's response to a server request (legacy sampling etc.).
		if len(m.ID) == 0 {
			return fail(`a message needs a "method" or an "id" with a "result" or "error"`)
		}
		var r, e bool
		m.Result, r = top.lookup("result")
		m.Error, e = top.lookup("error")
		if !r && !e {
			return fail(`a response needs "result" or "error"`)
		}
		if msg := tooMany(trimmed, "the message"); msg != "" {
			return fail(msg)
		}
		return m, nil
	case len(m.ID) == 0 && !strings.HasPrefix(m.Method, "notifications/"):
		return fail(`"id" is required: only notifications/* may omit it`)
	}
	// A request is not also a response (mcp-go would take it for one and
	// answer nothing).
	for _, k := range []string{"result", "error"} {
		if _, ok := top.lookup(k); ok {
			return fail(`a request or notification has no "` + k + `"`)
		}
	}
	params, ok := top.lookup("params")
	if !ok {
		if m.Method == MethodComplete {
			return nil, &RPCError{Code: CodeInvalidParams, Message: `invalid params: "params" is required for ` + MethodComplete, ID: m.ID}
		}
		return m, nil
	}
	if p := bytes.TrimSpace(params); len(p) == 0 || p[0] != '{' {
		return fail(`"params" must be an object`)
	}
	pm, err := members(params)
	if err != nil {
		return nil, &RPCError{Code: CodeParseError, Message: "parse error: malformed params"}
	}
	if msg := pm.check(paramKeys, "params"); msg != "" {
		return fail(msg)
	}
	// A member of the wrong type makes a valid request with invalid params
	// (JSON-RPC -32602), which mcp-go would answer -32600 "unparsable"
	// while decoding it.
	invalid := func(msg string) (*Message, *RPCError) {
		return nil, &RPCError{Code: CodeInvalidParams, Message: "invalid params: " + msg, ID: m.ID}
	}
	// Before anything below reads params, and before mcp-go decodes them
	// (the bounds' reasons, MaxMetaBytes and MaxValues).
	if raw, ok := pm.lookup("_meta"); ok && len(raw) > MaxMetaBytes {
		return invalid(`"params._meta" is larger than ` + strconv.Itoa(MaxMetaBytes) + ` bytes`)
	}
	if msg := tooMany(params, `"params"`); msg != "" {
		return invalid(msg)
	}
	if raw, ok := pm.lookup("name"); ok && m.Method == "tools/call" {
		if m.ToolName, ok = str(raw); !ok {
			return invalid(`"params.name" must be a string`)
		}
		m.Target = m.ToolName
	}
	if raw, ok := pm.lookup("name"); ok && m.Method == "prompts/get" {
		if m.Target, ok = str(raw); !ok {
			return invalid(`"params.name" must be a string`)
		}
	}
	if raw, ok := pm.lookup("arguments"); ok && m.Method == "prompts/get" && !stringValues(raw) {
		// MCP: a prompt's arguments are strings (ADR 0018).
		return invalid(`"params.arguments" of prompts/get must be an object of strings`)
	}
	if raw, ok := pm.lookup("uri"); ok && (m.Method == "resources/read" || m.Method == "resources/subscribe" || m.Method == "resources/unsubscribe") {
		if m.Target, ok = str(raw); !ok {
			return invalid(`"params.uri" must be a string`)
		}
		if m.Method == "resources/read" && len(m.Target) > resourceuri.MaxURIBytes {
			// No registration has a longer one, and each pinned template
			// is matched against it (attack run C4: a 20,000-character
			// URI cost 20 s of CPU against 62 long templates).
			return invalid(`"params.uri" is longer than ` + strconv.Itoa(resourceuri.MaxURIBytes) + ` bytes (a resource URI's bound)`)
		}
	}
	if raw, ok := pm.lookup("_meta"); ok && !isNull(raw) {
		if v := bytes.TrimSpace(raw); len(v) == 0 || v[0] != '{' {
			return invalid(`"params._meta" must be an object`)
		}
	}
	if m.Method == MethodComplete {
		if msg := checkCompletion(pm); msg != "" {
			return invalid(msg)
		}
	}
	if m.Method == "initialize" {
		// A 2025-era client declares its capabilities once, here.
		if msg := checkCapabilities(pm.get("capabilities"), "params.capabilities"); msg != "" {
			return fail(msg)
		}
		m.ClientCapabilities = capabilityNames(pm.get("capabilities"))
	}
	if raw, ok := pm.lookup("inputResponses"); ok {
		if msg := checkInputResponses(raw); msg != "" {
			return nil, &RPCError{Code: CodeInvalidParams, Message: "invalid params: " + msg, ID: m.ID}
		}
		m.InputResponses = raw
	}
	if raw, ok := pm.lookup("requestState"); ok {
		if m.RequestState, ok = str(raw); !ok {
			return nil, &RPCError{Code: CodeInvalidParams, Message: `invalid params: "requestState" must be a string`, ID: m.ID}
		}
		m.HasRequestState = true
	}
	if raw, ok := pm.lookup("_meta"); ok {
		if meta, err := members(raw); err == nil {
			// mcp-go reads the last of a repeated key, this parse the
			// first: the protocol version and capabilities each would see
			// could differ. Capabilities decode into a struct: folded
			// spellings match its fields too.
			if msg := meta.duplicate("params._meta"); msg != "" {
				return fail(msg)
			}
			if msg := checkCapabilities(meta.get(MetaClientCapabilities), "params._meta."+quote(MetaClientCapabilities)); msg != "" {
				return fail(msg)
			}
			if caps := capabilityNames(meta.get(MetaClientCapabilities)); caps != nil {
				m.ClientCapabilities = caps
			}
			m.MetaProtocolVersion, _ = str(meta.get(MetaProtocolVersion))
			for _, k := range TraceMetaKeys {
				if v, ok := str(meta.get(k)); ok && v != "" {
					if m.TraceMeta == nil {
						m.TraceMeta = make(map[string]string, len(TraceMetaKeys))
					}
					m.TraceMeta[k] = v
				}
			}
		}
	}
	return m, nil
}

// tooMany says how raw (valid JSON), named where, passes MaxValues or
// MaxContainers, or "".
func tooMany(raw []byte, where string) string {
	n := jsonlimits.Measure(raw, jsonlimits.Shape{Values: MaxValues, Containers: MaxContainers})
	switch {
	case n.Containers > MaxContainers:
		return where + " holds more than " + strconv.Itoa(MaxContainers) + " objects and arrays"
	case n.Values > MaxValues:
		return where + " holds more than " + strconv.Itoa(MaxValues) + " JSON values"
	}
	return ""
}

// MethodComplete is MCP's completion request.
const MethodComplete = "completion/complete"

// checkCompletion says what is wrong with a completion/complete's params
// ("" when nothing is). MCP requires a ref — {"type": "ref/prompt", "name"}
// or {"type": "ref/resource", "uri"} — and an argument {"name", "value"},
// strings all; a context's arguments, when present, are an object of
// strings. Each is invalid params (-32602, as MCP answers them), where
// mcp-go answered -32600 ("unparsable") for a ref of an unknown type, or
// none, and took a missing argument as empty.
func checkCompletion(pm object) string {
	ref, ok := pm.lookup("ref")
	if !ok {
		return `"params.ref" is required`
	}
	ro, err := members(ref)
	if err != nil {
		return `"params.ref" must be an object`
	}
	if msg := ro.check([]string{"type", "name", "uri", "title"}, "params.ref"); msg != "" {
		return msg
	}
	switch typ, _ := str(ro.get("type")); typ {
	case "ref/prompt":
		if _, ok := str(ro.get("name")); !ok {
			return `"params.ref.name" must be a string`
		}
	case "ref/resource":
		uri, ok := str(ro.get("uri"))
		if !ok {
			return `"params.ref.uri" must be a string`
		}
		if len(uri) > resourceuri.MaxURIBytes {
			// Matched against every pinned template, as a read's is.
			return `"params.ref.uri" is longer than ` + strconv.Itoa(resourceuri.MaxURIBytes) + ` bytes (a resource URI's bound)`
		}
	default:
		return `"params.ref.type" must be "ref/prompt" or "ref/resource"`
	}
	if t, ok := ro.lookup("title"); ok && !isNull(t) {
		if _, ok := str(t); !ok {
			return `"params.ref.title" must be a string`
		}
	}
	arg, ok := pm.lookup("argument")
	if !ok {
		return `"params.argument" is required`
	}
	ao, err := members(arg)
	if err != nil {
		return `"params.argument" must be an object`
	}
	if msg := ao.check([]string{"name", "value"}, "params.argument"); msg != "" {
		return msg
	}
	for _, k := range []string{"name", "value"} {
		if _, ok := str(ao.get(k)); !ok {
			return `"params.argument.` + k + `" must be a string`
		}
	}
	if c, ok := pm.lookup("context"); ok && !isNull(c) {
		co, err := members(c)
		if err != nil {
			return `"params.context" must be an object`
		}
		if msg := co.check([]string{"arguments"}, "params.context"); msg != "" {
			return msg
		}
		if a, ok := co.lookup("arguments"); ok && !stringValues(a) {
			return `"params.context.arguments" must be an object of strings`
		}
	}
	return ""
}

// isNull reports whether raw is the JSON null.
func isNull(raw json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }

// stringValues reports whether raw is null or an object whose members are
// strings or null (what mcp-go decodes into a map[string]string).
func stringValues(raw json.RawMessage) bool {
	if isNull(raw) {
		return true
	}
	o, err := members(raw)
	if err != nil {
		return false
	}
	for _, m := range o {
		if _, ok := str(m.value); !ok && !isNull(m.value) {
			return false
		}
	}
	return true
}

// capabilityKeys are the client capabilities mcp-go decodes into struct
// fields: a case-folded spelling of one would be the field to it.
var capabilityKeys = []string{"roots", "sampling", "elicitation", "tasks", "experimental", "extensions"}

// checkCapabilities is check of a capabilities object's members ("" when
// it is absent or not an object).
func checkCapabilities(raw json.RawMessage, where string) string {
	o, err := members(raw)
	if err != nil {
		return ""
	}
	return o.check(capabilityKeys, where)
}

// capabilityNames are the capabilities a client declares: the members of
// a JSON object whose value is an object (mcp-go reads "sampling": null as
// none); nil when raw is not an object.
func capabilityNames(raw json.RawMessage) []string {
	o, err := members(raw)
	if err != nil {
		return nil
	}
	out := make([]string, 0, len(o))
	for _, m := range o {
		if v := bytes.TrimSpace(m.value); len(v) > 0 && v[0] == '{' {
			out = append(out, m.key)
		}
	}
	return out
}

// checkInputResponses says why params.inputResponses is not an object
// whose members are objects (SEP-2322: each answers one input request),
// or "".
func checkInputResponses(raw json.RawMessage) string {
	o, err := members(raw)
	if err != nil {
		return `"inputResponses" must be an object`
	}
	if msg := o.check(nil, "params.inputResponses"); msg != "" {
		return msg
	}
	for _, m := range o {
		if v := bytes.TrimSpace(m.value); len(v) == 0 || v[0] != '{' {
			return `"inputResponses" members must be objects (` + quote(m.key) + ` is not)`
		}
	}
	return ""
}

// str decodes a JSON string value; ok is false for anything else. Strings
// without escapes are taken as they are.
func str(raw json.RawMessage) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' {
		return "", false
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : len(raw)-1]), true
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

func validID(raw json.RawMessage) bool {
	if len(raw) == 0 {
		return false
	}
	switch raw[0] {
	case '"':
		return true
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		// mcp-go reads a numeric id as a float64 and answers with that:
		// 1e400 it refuses unrecorded, and 2^53+1, 1e-400 or
		// 1.0000000000000001 it would answer under another id. An integer
		// within ±2^53, written without a fraction or an exponent, is
		// answered as it came (JSON-RPC: an id SHOULD NOT have a fraction).
		if bytes.ContainsAny(raw, ".eE") {
			return false
		}
		n, err := strconv.ParseInt(string(raw), 10, 64)
		return err == nil && n >= -1<<53 && n <= 1<<53
	}
	return false
}

type member struct {
	key   string
	value json.RawMessage
}

type object []member

func (o object) lookup(key string) (json.RawMessage, bool) {
	for _, m := range o {
		if m.key == key {
			return m.value, true
		}
	}
	return nil, false
}

func (o object) get(key string) json.RawMessage {
	v, _ := o.lookup(key)
	return v
}

// check refuses duplicate keys, keys that equal each other under Unicode
// case folding, and case-folded spellings of a known key. Each key is
// looked up once by its folded form: comparing every pair took minutes of
// CPU for one body of a few hundred thousand keys.
func (o object) check(known []string, where string) string {
	seen := make(map[string]string, len(o))
	for _, m := range o {
		f := fold(m.key)
		if n, ok := seen[f]; ok {
			if n == m.key {
				return "duplicate key " + quote(m.key) + " at " + where
			}
			return "keys " + quote(n) + " and " + quote(m.key) + " differ only in case at " + where
		}
		seen[f] = m.key
		for _, k := range known {
			if m.key != k && strings.EqualFold(m.key, k) {
				return "key " + quote(m.key) + " is a case-folded " + quote(k) + " at " + where
			}
		}
	}
	return ""
}

// duplicate refuses a key that repeats exactly: where mcp-go decodes into a
// map (params._meta), keys are matched exactly, and of a repeated one it
// keeps the last.
func (o object) duplicate(where string) string {
	seen := make(map[string]struct{}, len(o))
	for _, m := range o {
		if _, ok := seen[m.key]; ok {
			return "duplicate key " + quote(m.key) + " at " + where
		}
		seen[m.key] = struct{}{}
	}
	return ""
}

// fold is s with each rune replaced by the least rune of its simple case
// folding orbit: fold(a) == fold(b) exactly when strings.EqualFold(a, b).
func fold(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		b.WriteRune(least)
	}
	return b.String()
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }

// members reads one JSON object's members in order, values raw. The
// input must already be valid JSON (Parse checks json.Valid first), so a
// byte scanner suffices: keys are unescaped only when they hold a backslash.
func members(raw []byte) (object, error) {
	i := skipWS(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return nil, errNotObject
	}
	var out object
	i = skipWS(raw, i+1)
	if i < len(raw) && raw[i] == '}' {
		return out, nil
	}
	for i < len(raw) {
		if raw[i] != '"' {
			return nil, errNotObject
		}
		end := stringEnd(raw, i)
		key := string(raw[i+1 : end-1])
		if bytes.IndexByte(raw[i:end], '\\') >= 0 {
			if err := json.Unmarshal(raw[i:end], &key); err != nil {
				return nil, err
			}
		}
		i = skipWS(raw, end)
		if i >= len(raw) || raw[i] != ':' {
			return nil, errNotObject
		}
		i = skipWS(raw, i+1)
		vEnd := valueEnd(raw, i)
		out = append(out, member{key, json.RawMessage(raw[i:vEnd])})
		i = skipWS(raw, vEnd)
		if i < len(raw) && raw[i] == ',' {
			i = skipWS(raw, i+1)
			continue
		}
		if i < len(raw) && raw[i] == '}' {
			return out, nil
		}
		return nil, errNotObject
	}
	return nil, errNotObject
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index just past the string starting at b[i] == '"'.
func stringEnd(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(b)
}

// valueEnd returns the index just past the value starting at b[i].
func valueEnd(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		d := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = stringEnd(b, j) - 1
			case '{', '[':
				d++
			case '}', ']':
				d--
				if d == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	default:
		j := i
		for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\t' && b[j] != '\n' && b[j] != '\r' {
			j++
		}
		return j
	}
}

type parseError string

func (e parseError) Error() string { return string(e) }

const errNotObject = parseError("not a single JSON object")
