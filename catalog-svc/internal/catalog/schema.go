package catalog

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/sharedos/toolshare/services/contract/jsonlimits"
	"github.com/sharedos/toolshare/services/platform/memo"
)

// Schema caps. MCP servers must not dereference network $refs and should
// bound depth and subschema count (schemas are attacker-supplied and are
// compiled and evaluated on every call).
const (
	MaxSchemaBytes = 256 << 10 // 256 KiB of JSON text
	MaxSchemaDepth = 32        // JSON nesting depth of objects and arrays
	MaxSubschemas  = 2048      // JSON objects in one schema document
	// MaxAnnotationsBytes bounds the annotations object.
	MaxAnnotationsBytes = 64 << 10
)

const draft2020 = "https://json-schema.org/draft/2020-12/schema"

// upstreamDialects are the JSON Schema dialects a tool acquired from an
// upstream MCP server may declare with "$schema" besides 2020-12 (ADR 0019):
// MCP lets a server name its dialect, and most servers (zod's default)
// declare draft-07. The schema is published as sent and compiled under the
// dialect it declares; a registration of SharedOS's own stays 2020-12.
var upstreamDialects = map[string]*jsonschema.Draft{
	"http://json-schema.org/draft-07/schema":       jsonschema.Draft7,
	"https://json-schema.org/draft/2019-09/schema": jsonschema.Draft2019,
	"http://json-schema.org/draft/2019-09/schema":  jsonschema.Draft2019,
	"https://json-schema.org/draft/2020-12/schema": jsonschema.Draft2020,
}

// dialect is the schema dialect a registration's schemas are read in.
type dialect bool

const (
	only2020      dialect = false
	upstreamDraft dialect = true
)

// schemaBase is the (never fetched) URI each schema is compiled under. Any
// reference that would leave the document resolves against it and reaches
// the refusing loader.
const schemaBase = "https://schemas.sharedos.invalid/tool.json"

// parsedSchema is a validated, compiled schema plus the facts validation
// needs from it.
type parsedSchema struct {
	compiled *jsonschema.Schema
	// topProps are the names under the top-level "properties".
	topProps map[string]bool
	// closed: the top level sets "additionalProperties": false.
	closed bool
	// repeatsKey: an object of the schema repeats a key (registration
	// refuses it, unique_keys; a schema stored before is still served).
	repeatsKey bool
	// refCycle: the location ("#/$defs/a") of a subschema that reaches
	// itself without descending into the instance, "" if none
	// (registration refuses it, no_ref_cycle; a schema stored before is
	// still served, and fails only the calls that reach the cycle).
	refCycle string
	// nestedDialect: where a "$schema" below the top is, after the field,
	// and its value; "" if none (registration refuses it,
	// no_nested_dialect; a schema stored before is still served).
	nestedDialect [2]string
	// hidden: the first hidden character (checkText) in a key or string
	// outside titles, descriptions and property names — an enum value, a
	// default, an extension keyword (registration refuses it,
	// no_hidden_characters; a schema stored before the rule covered them
	// is still served).
	hidden error
	// size estimates the memory the compiled schema holds (schemaSize).
	size int64
}

// schemaSize estimates the memory a schema of rawBytes of JSON, whose
// regular expressions compile to regexInsts instructions, holds compiled:
// measured, a compiled schema holds 4–10 times its JSON (2,000 properties
// in 205 KB: 2.1 MB; 260 KB of enum strings: 1.0 MB), a few KB at least
// (5 KB for a 223-byte one), and a pattern ~45 bytes an instruction (8 of
// 2,000: 732 KB). The estimate is above each of them.
func schemaSize(rawBytes, regexInsts int) int64 {
	return 4<<10 + 12*int64(rawBytes) + 64*int64(regexInsts)
}

// errNoNetwork is what the loader returns for every URL: a tool schema must
// be self-contained.
var errNoNetwork = errors.New("loading referenced schemas is disabled (only local \"#...\" references)")

type refusingLoader struct{}

func (refusingLoader) Load(url string) (any, error) { return nil, errNoNetwork }

// compileSchema checks raw as a JSON Schema 2020-12 object schema ("type":
// "object" at the top), within the size, depth and subschema caps, with only
// local references and no hidden characters in titles and descriptions, and
// compiles it.
func compileSchema(field string, raw []byte, d dialect) (*parsedSchema, error) {
	key := memoKey{d: d, sum: sha256.Sum256(raw)}
	if ps, ok := compiled.Get(key); ok {
		return ps, nil
	}
	ps, err := compileSchemaUncached(field, raw, d)
	if err == nil {
		compiled.PutSized(key, ps, ps.size)
	}
	return ps, err
}

// compiled remembers the schemas compiled lately, by dialect and bytes: a
// batch whose tools share an output schema, and an upstream's refresh that
// registers the same schemas again, compile each distinct schema once. A
// parsedSchema is immutable and a compiled jsonschema.Schema is safe for
// concurrent validation. Only successes are kept (a refusal names the
// field it was found in). When full — 4,096 schemas, or maxMemoBytes of
// them as schemaSize estimates — it starts over: what it keeps of
// schemas no tool holds any more (a definition superseded or removed) is
// bounded by that (attack run: 400 MB more live heap at each refresh of an
// upstream whose schemas changed, kept after providers remove).
var compiled = memo.NewSized[memoKey, *parsedSchema](maxMemoSchemas, maxMemoBytes)

const (
	maxMemoSchemas = 4096
	maxMemoBytes   = 64 << 20
)

type memoKey struct {
	d   dialect
	sum [sha256.Size]byte
}

func compileSchemaUncached(field string, raw []byte, d dialect) (*parsedSchema, error) {
	if len(raw) == 0 {
		return nil, invalid(field, RuleRequired, "a JSON Schema object is required")
	}
	if len(raw) > MaxSchemaBytes {
		return nil, invalid(field, RuleSchemaSize, "%d bytes exceeds the %d-byte limit", len(raw), MaxSchemaBytes)
	}
	doc, err := decodeJSON(field, raw)
	if err != nil {
		return nil, err
	}
	repeats := jsonlimits.RepeatsKey(raw, doc) // before the compiler holds doc
	obj, ok := doc.(map[string]any)
	if !ok {
		return nil, invalid(field, RuleObjectSchema, "must be a JSON object, got %s", jsonKind(doc))
	}
	draft := jsonschema.Draft2020
	if s, present := obj["$schema"]; present {
		str, _ := s.(string)
		str = strings.TrimSuffix(str, "#")
		switch up, known := upstreamDialects[str]; {
		case str == draft2020:
		case d == upstreamDraft && known:
			draft = up
		case d == upstreamDraft:
			return nil, invalid(field+".$schema", RuleJSONSchema, "%v is not a dialect an upstream tool may declare (2020-12, 2019-09, draft-07)", s)
		default:
			return nil, invalid(field+".$schema", RuleJSONSchema, "%v is not %q; only JSON Schema 2020-12 is accepted", s, draft2020)
		}
	}
	if t, _ := obj["type"].(string); t != "object" {
		return nil, invalid(field+".type", RuleObjectSchema, `must be "object" at the top level, got %s`, describe(obj["type"]))
	}
	w := walker{}
	if err := w.walk(field, doc, 1, false); err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(draft)
	c.UseLoader(refusingLoader{})
	regexes := newRegexEngine()
	defer regexes.done()
	c.UseRegexpEngine(regexes.compile)
	if err := c.AddResource(schemaBase, doc); err != nil {
		return nil, invalid(field, RuleJSONSchema, "%s", trimDetail(err.Error()))
	}
	compiled, err := c.Compile(schemaBase)
	if err != nil {
		if r := regexes.refused; r != nil {
			return nil, w.regexTooLarge(field, r)
		}
		if refused, at := w.refusedLoad(err); refused {
			if at == "" {
				at = field
			}
			return nil, invalid(at, RuleNetworkRef, "%s", trimDetail(err.Error()))
		}
		return nil, invalid(field, RuleJSONSchema, "%s", trimDetail(err.Error()))
	}
	if err := checkWork(field, c, doc, compiled, &w, regexes); err != nil {
		return nil, err
	}
	ps := &parsedSchema{compiled: compiled, topProps: map[string]bool{}, repeatsKey: repeats,
		refCycle: trimDetail(refCycle(compiled)), hidden: w.hidden, nestedDialect: w.nestedDialect, size: schemaSize(len(raw), regexes.total)}
	if ap, ok := obj["additionalProperties"].(bool); ok && !ap {
		ps.closed = true
	}
	if props, ok := obj["properties"].(map[string]any); ok {
		for k := range props {
			ps.topProps[k] = true
		}
	}
	return ps, nil
}

// decodeJSON parses raw as one JSON value, keeping numbers exact.
func decodeJSON(field string, raw []byte) (any, error) {
	// encoding/json silently turns invalid UTF-8 into U+FFFD; the published
	// bytes are verbatim, so they must be valid as they are.
	if !utf8.Valid(raw) {
		return nil, invalid(field, RuleUTF8, "JSON text is not valid UTF-8")
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, invalid(field, RuleJSON, "not valid JSON: %s", trimDetail(err.Error()))
	}
	return doc, nil
}

// registrable applies the rules only registration enforces (a schema
// stored before them is still served) to ps, the schema of field.
func (ps *parsedSchema) registrable(field string) error {
	if ps.repeatsKey {
		return errRepeatsKey(field)
	}
	if ps.hidden != nil {
		return ps.hidden
	}
	if ps.refCycle != "" {
		return invalid(field, RuleRefCycle, "%s reaches itself through $ref, allOf, anyOf, oneOf, not or if/then/else without descending into the arguments: every call that reaches it would fail", ps.refCycle)
	}
	if at, was := ps.nestedDialect[0], ps.nestedDialect[1]; at != "" {
		return invalid(field+at, RuleNestedDialect, "%s: only the top of a schema may declare its dialect; a subschema is read in the schema's own", was)
	}
	return nil
}

// errRepeatsKey refuses a registration whose field repeats a key: the
// published bytes go to harnesses and models whose parsers may keep the
// first of two keys where SharedOS keeps the last.
func errRepeatsKey(field string) error {
	return invalid(field, RuleUniqueKeys, "an object repeats a key: parsers disagree on which one counts")
}

// dataKeywords hold instance data, not subschemas: a "$ref" or "description"
// inside them is a value, not a reference or an annotation.
var dataKeywords = map[string]bool{"enum": true, "const": true, "default": true, "examples": true}

type walker struct {
	objects int
	// hidden is the first hidden character found where only registration
	// refuses one (parsedSchema.hidden).
	hidden error
	// patterns are where each regular expression ("pattern",
	// "patternProperties") is first found, by its text: the field a
	// refusal of the compiler's regex engine names.
	patterns map[string]string
	// dynamicAnchor: a subschema holds "$dynamicAnchor";
	// nestedRecursiveAnchor: one below the top holds "$recursiveAnchor"
	// (where a dynamic reference may resolve, validationWork).
	dynamicAnchor, nestedRecursiveAnchor bool
	// nestedDialect is the first "$schema" below the top: where, after
	// the field, and its value (registration refuses it,
	// no_nested_dialect; a schema stored before is still served). dialects
	// are where each such "$schema" is first found, by its value.
	nestedDialect [2]string
	dialects      map[string]string
}

// notePattern keeps path as where the regular expression source is, when
// it is the first.
func (w *walker) notePattern(path, source string) {
	if w.patterns == nil {
		w.patterns = map[string]string{}
	}
	if _, ok := w.patterns[source]; !ok {
		w.patterns[source] = path
	}
}

// noteDialect notes a "$schema" (of value v) below the top, at path: a
// subschema that switches the dialect escapes the one the schema is read
// in (a draft-07 resource in an operator's 2020-12 schema asserts formats,
// "format": "regex" among them), and a remote metaschema is a reference
// the catalogue does not follow.
func (w *walker) noteDialect(path string, v any) {
	if w.nestedDialect[0] == "" {
		_, after, _ := strings.Cut(path, ".") // path is the field's, a step at least below it
		w.nestedDialect = [2]string{"." + after, describe(v)}
	}
	if s, ok := v.(string); ok {
		if w.dialects == nil {
			w.dialects = map[string]string{}
		}
		s = strings.TrimSuffix(s, "#")
		if _, seen := w.dialects[s]; !seen {
			w.dialects[s] = path
		}
	}
}

// refusedLoad reports whether err is the refusing loader's: the compiler
// wraps it in a *jsonschema.LoadURLError, which does not unwrap. at is the
// "$schema" below the top that asked for it, when the walk noted one (""
// if none).
func (w *walker) refusedLoad(err error) (refused bool, at string) {
	var le *jsonschema.LoadURLError
	if errors.As(err, &le) && errors.Is(le.Err, errNoNetwork) {
		return true, w.dialects[strings.TrimSuffix(le.URL, "#")]
	}
	return errors.Is(err, errNoNetwork), ""
}

// regexTooLarge is the refusal of a pattern the regex engine refused for
// its size, naming where it is (field when it is found nowhere).
func (w *walker) regexTooLarge(field string, r *regexRefusal) *ValidationError {
	at, ok := w.patterns[r.source]
	if !ok {
		at = field
	}
	return invalid(at, RuleRegexSize, "the pattern %s", r.why)
}

// noteHidden keeps err, checkText's or checkData's, as w's first.
func (w *walker) noteHidden(err error) {
	if w.hidden == nil {
		w.hidden = err
	}
}

// walk enforces the depth and subschema caps over the whole document,
// refuses numbers and U+0000 the catalogue cannot keep (checkNumber,
// checkNUL) anywhere in it and, outside data keywords, non-local
// references and hidden characters in "title", "description" and property
// names. Hidden characters in every other key and string — a harness hands
// the model the whole schema, so an enum value, a default or an example is
// published text as a description is (attack run: Unicode tag characters
// in enum[0] spelled an instruction no reviewer saw) — are noted for
// registration to refuse (noteHidden): a schema stored before that rule is
// still served.
func (w *walker) walk(path string, v any, depth int, data bool) error {
	if depth > MaxSchemaDepth {
		return invalid(path, RuleSchemaDepth, "nesting deeper than %d levels", MaxSchemaDepth)
	}
	switch v := v.(type) {
	case map[string]any:
		w.objects++
		if w.objects > MaxSubschemas {
			return invalid(path, RuleSubschemaCount, "more than %d JSON objects (subschemas) in one schema", MaxSubschemas)
		}
		for _, k := range slices.Sorted(maps.Keys(v)) {
			if err := checkNUL(path, "the key", k); err != nil {
				return err
			}
			child := v[k]
			p := path + "." + pathKey(k)
			if err := checkText(p, k); err != nil {
				w.noteHidden(err)
			}
			if !data {
				if err := w.checkKeyword(p, k, child); err != nil {
					return err
				}
				w.noteKeyword(p, k, child, depth)
				if k == "properties" || k == "patternProperties" || k == "$defs" || k == "definitions" || k == "dependentSchemas" {
					if err := w.walkNamed(p, child, depth+1); err != nil {
						return err
					}
					continue
				}
			}
			if err := w.walk(p, child, depth+1, data || dataKeywords[k]); err != nil {
				return err
			}
		}
	case []any:
		for i, child := range v {
			if err := w.walk(path+"["+strconv.Itoa(i)+"]", child, depth+1, data); err != nil {
				return err
			}
		}
	case string:
		if err := checkNUL(path, "the string", v); err != nil {
			return err
		}
		check := checkText
		if data {
			check = checkData
		}
		if err := check(path, v); err != nil {
			w.noteHidden(err)
		}
	case json.Number:
		return checkNumber(path, v)
	}
	return nil
}

// pathKey is k as a step of an error's field path: quoted (strconv.Quote
// escapes what is not printable) when it holds what checkText refuses, so
// an error never carries the hidden characters it reports.
func pathKey(k string) string {
	if checkText("", k) == nil {
		return k
	}
	return strconv.Quote(k)
}

// checkNUL refuses U+0000 in a schema's string or key (what the JSON
// escape \u0000 decodes to): PostgreSQL's jsonb refuses it (SQLSTATE
// 22P05), so the tool would be kept by the embedded store alone. what
// says which: "the key" (of the object at path) or "the string" (at path).
func checkNUL(path, what, s string) error {
	if i := strings.IndexByte(s, 0); i >= 0 {
		return invalid(path, RuleNoNUL, "%s %s holds U+0000 (NUL) at byte %d, which cannot be stored", what, strconv.Quote(shorten(s)), i)
	}
	return nil
}

// walkNamed walks a map of name → subschema; the names are shown to models
// (property names) and get the hidden-character check.
func (w *walker) walkNamed(path string, v any, depth int) error {
	m, ok := v.(map[string]any)
	if !ok {
		return w.walk(path, v, depth, false) // the compiler reports the type error
	}
	w.objects++
	if depth > MaxSchemaDepth {
		return invalid(path, RuleSchemaDepth, "nesting deeper than %d levels", MaxSchemaDepth)
	}
	for _, name := range slices.Sorted(maps.Keys(m)) {
		sub := m[name]
		p := path + "." + pathKey(name)
		if err := checkText(p, name); err != nil {
			return err
		}
		if err := w.walk(p, sub, depth+1, false); err != nil {
			return err
		}
	}
	return nil
}

// noteKeyword notes what the walk keeps of keyword k (at path, in an
// object at depth): the regular expressions, the dynamic anchors, a
// "$schema" below the top.
func (w *walker) noteKeyword(path, k string, v any, depth int) {
	switch k {
	case "$schema":
		if depth > 1 {
			w.noteDialect(path, v)
		}
	case "$dynamicAnchor":
		w.dynamicAnchor = true
	case "$recursiveAnchor":
		w.nestedRecursiveAnchor = w.nestedRecursiveAnchor || depth > 1
	case "pattern":
		if s, ok := v.(string); ok {
			w.notePattern(path, s)
		}
	case "patternProperties":
		if m, ok := v.(map[string]any); ok {
			for name := range m {
				w.notePattern(path+"."+pathKey(shorten(name)), name)
			}
		}
	}
}

func (w *walker) checkKeyword(path, k string, v any) error {
	switch k {
	case "$ref", "$dynamicRef":
		if s, ok := v.(string); ok && !strings.HasPrefix(s, "#") {
			return invalid(path, RuleNetworkRef, "%q is not a local reference (\"#...\"); network and relative references are refused", s)
		}
	case "title", "description", "$comment":
		if s, ok := v.(string); ok {
			return checkText(path, s)
		}
	}
	return nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	default:
		return "a number"
	}
}

func describe(v any) string {
	if v == nil {
		return "nothing"
	}
	if s, ok := v.(string); ok {
		return strconv.Quote(s)
	}
	return jsonKind(v)
}

// trimDetail keeps validator messages readable in a gRPC status.
func trimDetail(s string) string {
	const max = 400
	s = strings.ReplaceAll(s, schemaBase, "")
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}

// checkAnnotations requires a JSON object and applies the hidden-character
// check to every string in it ("title" is shown to users and models), and
// checkNumber to every number. No object in it may hold two keys that
// differ only in letter case (unique_keys): the concurrency class and the
// bridge read the annotations case-blind, a policy reads them exactly, so
// {"readOnlyHint":false,"ReadOnlyHint":true} would be read-only to one and
// not to the other.
func checkAnnotations(raw []byte) error {
	if len(raw) == 0 {
		return nil
	}
	if len(raw) > MaxAnnotationsBytes {
		return invalid("annotations", RuleSchemaSize, "%d bytes exceeds the %d-byte limit", len(raw), MaxAnnotationsBytes)
	}
	doc, err := decodeJSON("annotations", raw)
	if err != nil {
		return err
	}
	if jsonlimits.RepeatsKey(raw, doc) {
		return errRepeatsKey("annotations")
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return invalid("annotations", RuleJSONObject, "must be a JSON object, got %s", jsonKind(doc))
	}
	return checkStrings("annotations", obj, 1)
}

func checkStrings(path string, v any, depth int) error {
	if depth > MaxSchemaDepth {
		return invalid(path, RuleSchemaDepth, "nesting deeper than %d levels", MaxSchemaDepth)
	}
	switch v := v.(type) {
	case string:
		return checkText(path, v)
	case json.Number:
		// The policy reads annotations, and authz-svc refuses a longer
		// number: one tool would fail every listing (FilterTools).
		if len(v) > jsonlimits.MaxNumberChars {
			return invalid(path, RuleNumberRange, "%s is longer than the %d characters a policy input's number may be", shorten(string(v)), jsonlimits.MaxNumberChars)
		}
		return checkNumber(path, v)
	case map[string]any:
		folded := make(map[string]string, len(v))
		for _, k := range slices.Sorted(maps.Keys(v)) {
			c := v[k]
			if err := checkText(path+"."+k, k); err != nil {
				return err
			}
			f := foldKey(k)
			if other, ok := folded[f]; ok {
				return invalid(path, RuleUniqueKeys, "keys %q and %q differ only in letter case: a case-blind reader (Go's encoding/json, the bridge's MCP tool) takes them as one, an exact-key reader (a policy) as two", other, k)
			}
			folded[f] = k
			if err := checkStrings(path+"."+k, c, depth+1); err != nil {
				return err
			}
		}
	case []any:
		for i, c := range v {
			if err := checkStrings(fmt.Sprintf("%s[%d]", path, i), c, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// foldKey is k with each character replaced by the least of its Unicode
// simple case folds: two keys have one foldKey exactly when
// strings.EqualFold holds for them.
func foldKey(k string) string {
	return strings.Map(func(r rune) rune {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		return least
	}, k)
}

// PostgreSQL's numeric, which a jsonb number is, holds a number with at most
// maxNumberScale digits after the decimal point as written (its display
// scale: the fraction's digits less the exponent, trailing zeros included,
// so 1e-16383 is stored and 1.0e-16383, 10e-16384 and 0e-16384 are not) and
// an exponent of magnitude below maxNumberExponent+1 (INT_MAX/2, even for 0).
const (
	maxNumberScale    = 16383
	maxNumberExponent = 1<<30 - 2
)

// checkNumber refuses a JSON number the catalogue cannot keep: one
// PostgreSQL's jsonb refuses (SQLSTATE 22003, numeric overflow; the tool
// would be stored by the embedded store alone), or one beyond a double's
// range, which the published canonical form (RFC 8785) cannot write. A
// double's range lies far inside numeric's 131072 digits before the point.
func checkNumber(path string, n json.Number) error {
	s := string(n) // JSON number grammar, checked by the decoder
	mantissa, exp := splitNumber(s)
	var e int64
	if exp != "" {
		v, err := strconv.ParseInt(exp, 10, 64)
		if err != nil || v > maxNumberExponent || v < -maxNumberExponent {
			return invalid(path, RuleNumberRange, "%s: an exponent beyond ±%d cannot be stored", shorten(s), maxNumberExponent)
		}
		e = v
	}
	_, frac, _ := strings.Cut(mantissa, ".")
	if scale := int64(len(frac)) - e; scale > maxNumberScale {
		return invalid(path, RuleNumberRange, "%s has %d digits after the decimal point; at most %d can be stored", shorten(s), scale, maxNumberScale)
	}
	if _, err := strconv.ParseFloat(s, 64); err != nil { // only ErrRange: beyond ±1.8e308
		return invalid(path, RuleNumberRange, "%s is beyond a double's range (about ±1.8e308), which the published form's numbers are", shorten(s))
	}
	return nil
}

// splitNumber is a JSON number's mantissa and exponent ("" if none).
func splitNumber(s string) (mantissa, exp string) {
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		return s[:i], s[i+1:]
	}
	return s, ""
}

// shorten is s for a message: a number or string may run to the schema's
// size. It cuts at character boundaries.
func shorten(s string) string {
	const keep = 24
	if len(s) <= 2*keep {
		return s
	}
	head, tail := keep, len(s)-keep
	for head > 0 && !utf8.RuneStart(s[head]) {
		head--
	}
	for tail < len(s) && !utf8.RuneStart(s[tail]) {
		tail++
	}
	return s[:head] + "…" + s[tail:]
}
