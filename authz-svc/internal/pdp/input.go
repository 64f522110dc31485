package pdp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/open-policy-agent/opa/v1/ast"
	"golang.org/x/text/unicode/norm"

	"github.com/sharedos/toolshare/services/contract/jsonlimits"
	"github.com/sharedos/toolshare/services/contract/requirement"
)

// Limits on a JSON object taken from a request (arguments, annotations).
// They are far below encoding/json's own depth limit (10,000) so that a
// hostile document is refused before it costs parse time or OPA stack.
const (
	MaxJSONBytes   = jsonlimits.MaxArgumentsBytes
	MaxJSONDepth   = jsonlimits.MaxDepth
	MaxNumberChars = jsonlimits.MaxNumberChars
	// MaxJSONValues and MaxJSONContainers bound what parsing builds: each
	// value is an OPA value of 150 to 900 bytes, so 1 MiB of {"x":{}}
	// elements cost 112 MB before the evaluation's deadline could stop
	// anything; a string costs about its bytes, so long text still fits.
	MaxJSONValues     = jsonlimits.MaxArgumentValues
	MaxJSONContainers = jsonlimits.MaxArgumentContainers
)

// jsonShape is the bounds Measure stops at.
var jsonShape = jsonlimits.Shape{Depth: MaxJSONDepth, Values: MaxJSONValues, Containers: MaxJSONContainers}

// JSONError says why a JSON object from a request was refused; the caller
// adds the field name.
type JSONError struct {
	Rule string
}

func (e *JSONError) Error() string { return e.Rule }

// Context is the trusted identity a decision is made for.
type Context struct {
	Principal  string
	Tenant     string
	Roles      []string
	Attributes map[string]string
}

// Tool is the facts about one tool a policy may read.
type Tool struct {
	Name      string
	Namespace string
	Class     string
	Source    string
	// Annotations is a parsed JSON object (ParseObject); nil means {}.
	Annotations ast.Value
}

// Request is one decision's facts, already validated.
type Request struct {
	Context  Context
	Tool     Tool
	Action   string
	Resource string
	// Arguments is a parsed JSON object (ParseObject); nil means {}.
	Arguments ast.Value
}

// ParseObject parses raw as a JSON object into an ast.Value, keeping every
// number's exact text. Empty input is the empty object. It refuses input
// larger than MaxJSONBytes, nested deeper than MaxJSONDepth, holding more
// than MaxJSONValues values or MaxJSONContainers objects and arrays (counted
// in the same scan as the depth, before anything is built), not valid UTF-8
// (encoding/json would silently substitute U+FFFD, so the policy would see
// something other than what the handler gets), not valid JSON, not an
// object, or with a key twice in one object (encoding/json keeps the last,
// a handler's parser may keep the first: the policy would decide on a value
// the handler never reads).
func ParseObject(raw []byte) (ast.Value, error) { return parseObject(raw, true) }

// parseObject is ParseObject; with uniqueKeys unset a repeated key is let
// through (the last one kept), as for ParseSharedObject.
func parseObject(raw []byte, uniqueKeys bool) (ast.Value, error) {
	if len(raw) == 0 {
		return ast.NewObject(), nil
	}
	if len(raw) > MaxJSONBytes {
		return nil, &JSONError{Rule: fmt.Sprintf("must be at most %d bytes, got %d", MaxJSONBytes, len(raw))}
	}
	if !utf8.Valid(raw) {
		return nil, &JSONError{Rule: "must be valid UTF-8"}
	}
	shape := jsonlimits.Measure(raw, jsonShape)
	if shape.Depth > MaxJSONDepth {
		return nil, &JSONError{Rule: fmt.Sprintf("must be nested at most %d levels deep", MaxJSONDepth)}
	}
	if !json.Valid(raw) {
		return nil, &JSONError{Rule: "must be valid JSON"}
	}
	if first := firstNonSpace(raw); first != '{' {
		return nil, &JSONError{Rule: "must be a JSON object"}
	}
	if shape.Containers > MaxJSONContainers {
		return nil, &JSONError{Rule: fmt.Sprintf("must hold at most %d objects and arrays", MaxJSONContainers)}
	}
	if shape.Values > MaxJSONValues {
		return nil, &JSONError{Rule: fmt.Sprintf("must hold at most %d JSON values", MaxJSONValues)}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var x any
	if err := dec.Decode(&x); err != nil {
		return nil, &JSONError{Rule: "must be valid JSON"}
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &JSONError{Rule: "must be a single JSON value"}
	}
	if longNumber(x) {
		return nil, &JSONError{Rule: fmt.Sprintf("numbers must be at most %d characters", MaxNumberChars)}
	}
	if uniqueKeys && jsonlimits.RepeatsKey(raw, x) {
		return nil, &JSONError{Rule: "keys must not appear twice in one object"}
	}
	v, err := ast.InterfaceToValue(x)
	if err != nil {
		return nil, &JSONError{Rule: "must be valid JSON"}
	}
	return v, nil
}

// longNumber reports whether v holds a number longer than MaxNumberChars.
func longNumber(v any) bool {
	switch x := v.(type) {
	case json.Number:
		return len(x) > MaxNumberChars
	case map[string]any:
		for _, e := range x {
			if longNumber(e) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if longNumber(e) {
				return true
			}
		}
	}
	return false
}

// ParseSharedObject is ParseObject for small objects many requests repeat,
// such as a catalogue's tool annotations (FilterTools parses one per tool):
// the value parsed from the same bytes before is returned again, shared, so
// callers must not change it (evaluation does not change input terms).
// Bounded: at most maxShared objects of at most maxSharedBytes each are kept;
// refused input is never kept. A repeated key is not refused here: the
// catalogue published those bytes (it refuses a repeated key at
// registration, unique_keys; a tool registered before may hold one), and
// one tool's could otherwise fail every listing that holds it.
func ParseSharedObject(raw []byte) (ast.Value, error) {
	if len(raw) > maxSharedBytes {
		return parseObject(raw, false)
	}
	shared.mu.RLock()
	v, ok := shared.m[string(raw)]
	shared.mu.RUnlock()
	if ok {
		return v, nil
	}
	v, err := parseObject(raw, false)
	if err != nil {
		return nil, err
	}
	shared.mu.Lock()
	if len(shared.m) >= maxShared {
		clear(shared.m)
	}
	shared.m[string(raw)] = v
	shared.mu.Unlock()
	return v, nil
}

const (
	maxShared      = 4096
	maxSharedBytes = 1024
)

// shared is its own map, not a services/platform/memo: a lookup by
// shared.m[string(raw)] does not copy raw, and through a generic Get it
// would (≈ 90 ns and an allocation against 23 ns per tool).
var shared = struct {
	mu sync.RWMutex
	m  map[string]ast.Value
}{m: map[string]ast.Value{}}

func firstNonSpace(raw []byte) byte {
	for _, c := range raw {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return c
	}
	return 0
}

var (
	keyContext     = ast.StringTerm("context")
	keyTool        = ast.StringTerm("tool")
	keyTools       = ast.StringTerm("tools")
	keyAction      = ast.StringTerm("action")
	keyResource    = ast.StringTerm("resource")
	keyArguments   = ast.StringTerm("arguments")
	keyPrincipal   = ast.StringTerm("principal")
	keyTenant      = ast.StringTerm("tenant")
	keyRoles       = ast.StringTerm("roles")
	keyAttributes  = ast.StringTerm("attributes")
	keyName        = ast.StringTerm("name")
	keyNamespace   = ast.StringTerm("namespace")
	keyClass       = ast.StringTerm("class")
	keyAnnotations = ast.StringTerm("annotations")
	keySource      = ast.StringTerm("source")
	keyFile        = ast.StringTerm("file")
	keyPath        = ast.StringTerm("path")
	keyAbsolute    = ast.StringTerm("absolute")
	keySuspicious  = ast.StringTerm("suspicious")
)

// contextTerm builds input.context. FilterTools builds it once per call and
// shares it across every tool's input; ast terms are not mutated by eval.
func contextTerm(c Context) *ast.Term {
	roles := make([]*ast.Term, len(c.Roles))
	for i, r := range c.Roles {
		roles[i] = ast.StringTerm(r)
	}
	attrs := make([][2]*ast.Term, 0, len(c.Attributes))
	for k, v := range c.Attributes {
		attrs = append(attrs, ast.Item(ast.StringTerm(k), ast.StringTerm(v)))
	}
	return ast.ObjectTerm(
		ast.Item(keyPrincipal, ast.StringTerm(c.Principal)),
		ast.Item(keyTenant, ast.StringTerm(c.Tenant)),
		ast.Item(keyRoles, ast.ArrayTerm(roles...)),
		ast.Item(keyAttributes, ast.ObjectTerm(attrs...)),
	)
}

func toolTerm(t Tool) *ast.Term {
	ann := t.Annotations
	if ann == nil {
		ann = ast.NewObject()
	}
	return ast.ObjectTerm(
		ast.Item(keyName, ast.StringTerm(t.Name)),
		ast.Item(keyNamespace, ast.StringTerm(t.Namespace)),
		ast.Item(keyClass, ast.StringTerm(t.Class)),
		ast.Item(keyAnnotations, ast.NewTerm(ann)),
		ast.Item(keySource, ast.StringTerm(t.Source)),
	)
}

// inputValue assembles the input document (see the package doc).
func inputValue(ctxTerm, tool *ast.Term, action, resource string, args ast.Value) ast.Value {
	if args == nil {
		args = ast.NewObject()
	}
	in := ast.NewObject(
		ast.Item(keyContext, ctxTerm),
		ast.Item(keyTool, tool),
		ast.Item(keyAction, ast.StringTerm(action)),
		ast.Item(keyResource, ast.StringTerm(resource)),
		ast.Item(keyArguments, ast.NewTerm(args)),
	)
	if f, ok := FileFactsOf(resource); ok {
		in.Insert(keyFile, ast.ObjectTerm(
			ast.Item(keyPath, ast.StringTerm(f.Path)),
			ast.Item(keyAbsolute, ast.BooleanTerm(f.Absolute)),
			ast.Item(keySuspicious, ast.BooleanTerm(f.Suspicious)),
		))
	}
	return in
}

// MaxPathSeparators bounds the separators of a file resource's path: a
// path with more is Suspicious.
const MaxPathSeparators = 64

// FileFacts are what authz-svc itself derives from a file: resource, as
// input.file: the policy decides on them instead of re-cleaning the path in
// Rego (which cost the example policy most of its evaluation time). They
// are computed here, in the decision point, from the raw resource string —
// never taken from the caller's own cleaning.
type FileFacts struct {
	// Path is the path cleaned by the contract's POSIX rule
	// (requirement.CleanPOSIX: backslashes are separators, "." and ".."
	// resolved, ".." at the root stays at the root) when Absolute, else the
	// path with backslashes as slashes.
	Path string
	// Absolute: the path (backslashes as slashes) starts with "/".
	Absolute bool
	// Suspicious: the raw path holds a percent-encoded dot, slash,
	// backslash or NUL (%2e %2f %5c %00, any case), a look-alike dot or
	// slash (U+FF0E, U+2024, U+FF0F), a NUL byte, or more than
	// MaxPathSeparators separators, or decoding its escapes again and
	// again gives one of these, a separator more or an overlong UTF-8
	// form (decodesToSeparator) — something a layer below might decode
	// into a path the cleaning never saw.
	Suspicious bool
}

// FileFactsOf derives the FileFacts of resource; ok is false when it is not
// a file: resource.
func FileFactsOf(resource string) (FileFacts, bool) {
	raw, ok := strings.CutPrefix(resource, "file:")
	if !ok {
		return FileFacts{}, false
	}
	slashed := strings.ReplaceAll(raw, `\`, "/")
	f := FileFacts{Path: slashed, Absolute: strings.HasPrefix(slashed, "/")}
	if f.Absolute {
		f.Path = requirement.CleanPOSIX(slashed)
	}
	f.Suspicious = strings.Count(slashed, "/") > MaxPathSeparators || suspiciousText(raw) || decodesToSeparator(raw)
	return f, true
}

// suspiciousText reports what s holds itself: a NUL, a look-alike dot or
// slash, an encoded separator, one that NFKC makes.
func suspiciousText(s string) bool {
	return strings.ContainsAny(s, "\x00\uFF0E\u2024\uFF0F") || hasEncodedSeparator(s) || foldsToSeparator(s)
}

// decodeRounds bounds how often decodesToSeparator decodes: more layers
// than any stack decodes in a row.
const decodeRounds = 4

// decodesToSeparator reports whether decoding raw's percent escapes again
// and again (%XX, and %uXXXX as IIS reads it), after NFKC or not, ever
// gives what suspiciousText finds, a dot, slash, backslash or NUL more, or
// an overlong UTF-8 form: "%%32%65" decodes to "%2e", "%u002e" to ".",
// "％２ｅ" folds to "%2e", "%f0%80%80%ae" to an overlong ".".
func decodesToSeparator(raw string) bool {
	if !strings.Contains(raw, "%") && isASCII(raw) {
		return false
	}
	for _, s := range []string{raw, norm.NFKC.String(raw)} {
		for range decodeRounds {
			d := percentDecode(s)
			if d == s {
				break
			}
			if suspiciousText(d) || overlong(d) || separators(d) > separators(s) {
				return true
			}
			s = d
		}
	}
	return false
}

// separators counts the dots, slashes, backslashes and NULs of s.
func separators(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '.', '/', '\\', 0:
			n++
		}
	}
	return n
}

// percentDecode decodes every %XX and %uXXXX of s, leaving any other '%'.
func percentDecode(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' {
			if i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
				b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
				i += 2
				continue
			}
			if i+5 < len(s) && s[i+1]|0x20 == 'u' && isHex(s[i+2]) && isHex(s[i+3]) && isHex(s[i+4]) && isHex(s[i+5]) {
				r := rune(unhex(s[i+2]))<<12 | rune(unhex(s[i+3]))<<8 | rune(unhex(s[i+4]))<<4 | rune(unhex(s[i+5]))
				b.WriteRune(r)
				i += 5
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c|0x20 >= 'a' && c|0x20 <= 'f' }

func unhex(c byte) byte {
	if c <= '9' {
		return c - '0'
	}
	return c | 0x20 - 'a' + 10
}

// overlong reports an overlong UTF-8 form in s: a lead byte C0, C1 or of
// the old 5- and 6-byte forms (F8–FF) followed by a continuation byte, E0
// then 80–9F, or F0 then 80–8F — a form a lenient decoder reads as a
// character that has a shorter one ("." as C0 AE). Other bytes that are
// not UTF-8 (a Latin-1 "ü", FC, before a letter) are no such form.
func overlong(s string) bool {
	cont := func(c byte) bool { return c&0xC0 == 0x80 }
	for i := 0; i+1 < len(s); i++ {
		c, d := s[i], s[i+1]
		switch {
		case (c == 0xC0 || c == 0xC1 || c >= 0xF8) && cont(d),
			c == 0xE0 && d >= 0x80 && d <= 0x9F,
			c == 0xF0 && d >= 0x80 && d <= 0x8F:
			return true
		}
	}
	return false
}

// foldsToSeparator reports whether compatibility normalisation (NFKC, as a
// layer below may apply) makes more dots, slashes or backslashes of raw than
// it holds: a look-alike (‥ U+2025, ﹒ U+FE52, ＼ U+FF3C, …) the cleaning
// never saw as one.
func foldsToSeparator(raw string) bool {
	if isASCII(raw) {
		return false
	}
	n := norm.NFKC.String(raw)
	for _, c := range []string{".", "/", `\`} {
		if strings.Count(n, c) > strings.Count(raw, c) {
			return true
		}
	}
	return false
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// hasEncodedSeparator reports %2e, %2f, %5c, %00 or %25 (encoded again) in
// s, in any case. An overlong form (%c0%ae) is decodesToSeparator's.
func hasEncodedSeparator(s string) bool {
	for i := 0; i+2 < len(s); i++ {
		if s[i] != '%' {
			continue
		}
		switch a, b := s[i+1], s[i+2]|0x20; {
		case a == '2' && (b == 'e' || b == 'f'), a == '5' && b == 'c', a == '0' && s[i+2] == '0':
			return true
		case a == '2' && s[i+2] == '5': // %25: encoded again (%252e)
			return true
		}
	}
	return false
}
