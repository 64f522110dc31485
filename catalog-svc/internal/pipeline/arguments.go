package pipeline

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/sharedos/toolshare/services/contract/jsonlimits"
	"github.com/sharedos/toolshare/services/contract/redact"
)

// Argument limits (owned by jsonlimits). They run before the schema
// validator so that hostile input never reaches a recursive parser or the
// policy engine.
const (
	MaxArgumentsBytes = jsonlimits.MaxArgumentsBytes
	MaxArgumentsDepth = jsonlimits.MaxDepth
	// MaxNumberChars is authz-svc's cap on a number's text: a longer one
	// is the model's invalid argument here, not an authorization failure
	// there.
	MaxNumberChars = jsonlimits.MaxNumberChars
	// MaxArgumentValues and MaxArgumentContainers are authz-svc's caps on
	// the values it builds of the arguments (each an OPA value): past them
	// the model's invalid arguments here, not an authorization failure there.
	MaxArgumentValues     = jsonlimits.MaxArgumentValues
	MaxArgumentContainers = jsonlimits.MaxArgumentContainers
)

// frame is one open object or array while decoding arguments.
type frame struct {
	obj       map[string]any // the object being filled, or nil for an array
	arr       []any
	expectKey bool
	key       string // the member whose value comes next
	// folded maps each key's case fold to the key, made at the object's
	// second key (most objects have one).
	folded map[string]string
}

// foldKey is s under simple Unicode case folding, the equivalence
// strings.EqualFold (and encoding/json's field matching) uses: "PATH",
// "Path" and "pAtH" — and "K" with the Kelvin sign — fold alike.
func foldKey(s string) string { return strings.ToLower(strings.ToUpper(s)) }

// checkFolded refuses key when another key of the object folds alike: a
// case-insensitive decoder in a provider could read the one the policy
// never saw.
func (f *frame) checkFolded(key string) error {
	if f.folded == nil {
		if len(f.obj) == 0 {
			return nil
		}
		f.folded = make(map[string]string, 4)
		for k := range f.obj {
			f.folded[foldKey(k)] = k
		}
	}
	fk := foldKey(key)
	if other, ok := f.folded[fk]; ok {
		return fmt.Errorf("the keys %q and %q differ only in case; one object may hold only one of them",
			truncate(other, 64), truncate(key, 64))
	}
	f.folded[fk] = key
	return nil
}

// decodeArguments is the kernel's one parse of a call's arguments. In one
// streaming pass over the raw bytes it enforces the structural rules —
// valid UTF-8, a single JSON object, nesting depth at most
// MaxArgumentsDepth, no duplicate keys in any object (two parsers that
// disagree on which duplicate wins would let the policy and the handler see
// different arguments), and no two keys of one object equal under case
// folding (a case-insensitive decoder in a provider would pick one the
// requirement and the policy never saw), numbers at most MaxNumberChars
// long, at most MaxArgumentValues values, MaxArgumentContainers of them
// objects and arrays (authz-svc refuses more), and within a double's range
// (jsonlimits.CheckNumber: none that a double reads as infinite, or as 0
// when it is not 0; the schema validator reads each number exactly, and
// 1e-999999 cost it 25 ms, 1e-1000001 a panic, while 1e-400 passed
// "exclusiveMinimum": 0 and reached the tool as 0), a refused one named by
// its location — and builds the decoded value (numbers as json.Number)
// that schema validation and the requirement read.
// json.Decoder.Token does not recurse, so a hostile 10^5-deep input is
// refused at depth 65 without stack growth. The raw bytes stay what is
// authorized, digested and dispatched.
func decodeArguments(raw []byte) (map[string]any, error) {
	if len(raw) > MaxArgumentsBytes {
		return nil, fmt.Errorf("%d bytes; the limit is %d", len(raw), MaxArgumentsBytes)
	}
	if !utf8.Valid(raw) {
		return nil, errors.New("not valid UTF-8")
	}
	trimmed := bytes.TrimLeft(raw, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, errors.New("not a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var stack []*frame
	var root map[string]any
	values, containers := 0, 0
	// done attaches a complete value to the open container; it reports
	// whether the top-level object is complete.
	done := func(v any) bool {
		if len(stack) == 0 {
			root, _ = v.(map[string]any)
			return true
		}
		top := stack[len(stack)-1]
		if top.obj != nil {
			top.obj[top.key] = v
			top.expectKey = true
		} else {
			top.arr = append(top.arr, v)
		}
		return false
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil, errors.New("not valid JSON")
		}
		complete := false
		if n := len(stack); n > 0 && stack[n-1].obj != nil && stack[n-1].expectKey {
			top := stack[n-1]
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:n-1]
				complete = done(top.obj)
			} else {
				key, _ := tok.(string)
				if _, dup := top.obj[key]; dup {
					return nil, fmt.Errorf("the key %q appears twice in one object", truncate(key, 64))
				}
				if err := top.checkFolded(key); err != nil {
					return nil, err
				}
				top.key, top.expectKey = key, false
				continue
			}
		} else {
			switch tok {
			case json.Delim('{'), json.Delim('['):
				if len(stack) >= MaxArgumentsDepth {
					return nil, fmt.Errorf("nested deeper than %d levels", MaxArgumentsDepth)
				}
				if values++; values > MaxArgumentValues {
					return nil, fmt.Errorf("more than %d JSON values", MaxArgumentValues)
				}
				if containers++; containers > MaxArgumentContainers {
					return nil, fmt.Errorf("more than %d objects and arrays", MaxArgumentContainers)
				}
				f := &frame{}
				if tok == json.Delim('{') {
					f.obj, f.expectKey = map[string]any{}, true
				} else {
					f.arr = []any{}
				}
				stack = append(stack, f)
				continue
			case json.Delim(']'):
				top := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				complete = done(top.arr)
			default:
				if n, ok := tok.(json.Number); ok {
					if err := jsonlimits.CheckNumber(string(n)); err != nil {
						return nil, fmt.Errorf("at %s: %w", pointer(stack), err)
					}
				}
				if values++; values > MaxArgumentValues {
					return nil, fmt.Errorf("more than %d JSON values", MaxArgumentValues)
				}
				complete = done(tok)
			}
		}
		if complete {
			// The top-level object is closed: nothing may follow it.
			if _, err := dec.Token(); err != io.EOF {
				return nil, errors.New("more than one JSON value")
			}
			return root, nil
		}
	}
}

// pointer is the JSON Pointer of the value decodeArguments reads next,
// cut at 200 bytes: each open object's member, each open array's index.
func pointer(stack []*frame) string {
	var b strings.Builder
	for _, f := range stack {
		if f.obj != nil {
			b.WriteString("/" + redact.PointerToken(f.key))
		} else {
			b.WriteString("/" + strconv.Itoa(len(f.arr)))
		}
	}
	return truncate(b.String(), 200)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return cutAtRune(s, n) + "…"
}

// cutAtRune cuts s to at most n bytes, on a rune boundary.
func cutAtRune(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// validateSchema validates the decoded arguments against schema. On a
// violation it returns the reason a model reads — the first failing
// location as a JSON pointer into the arguments and the validator's
// message, which may quote the value in any rendering (4.1×10⁰⁹) — and the
// reason the record keeps: the location and the failing keyword, no value
// (invariant 11).
func validateSchema(schema *jsonschema.Schema, args map[string]any) (answer, record string, ok bool) {
	err := schema.Validate(args)
	if err == nil {
		return "", "", true
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return "could not be validated", "could not be validated", false
	}
	leaf := ve
	for len(leaf.Causes) > 0 {
		leaf = leaf.Causes[0]
	}
	// The record's location names a key the schema does not declare by its
	// digest, before the location is cut: a cut key is no longer found
	// whole to be redacted (invariant 11).
	loc, recLoc := "/", "/"
	if len(leaf.InstanceLocation) > 0 {
		loc, recLoc = "", ""
		var declared map[string]bool
		var at any = args
		for _, tok := range leaf.InstanceLocation {
			esc := redact.PointerToken(tok)
			loc += "/" + esc
			keep := false
			switch v := at.(type) {
			case []any: // an index
				keep = true
				if i, err := strconv.Atoi(tok); err == nil && i >= 0 && i < len(v) {
					at = v[i]
				}
			case map[string]any:
				if declared == nil {
					declared = propertyNames(schema)
				}
				keep = declared[tok]
				at = v[tok]
			}
			if keep {
				recLoc += "/" + esc
			} else {
				recLoc += "/" + redact.Digest(tok)
			}
		}
	}
	msg := "does not match the input schema"
	if out := leaf.BasicOutput(); out != nil && out.Error != nil {
		msg = out.Error.String()
	}
	keyword := "the input schema"
	if leaf.ErrorKind != nil {
		if kp := leaf.ErrorKind.KeywordPath(); len(kp) > 0 {
			keyword = strings.Join(kp, "/")
		}
	}
	loc, recLoc = truncate(loc, 200), truncate(recLoc, 200)
	return fmt.Sprintf("at %s: %s", loc, msg), fmt.Sprintf("at %s: the value does not satisfy %s", recLoc, keyword), false
}

// propertyNames are the names schema declares as properties (properties,
// required, dependentRequired, dependentSchemas, dependencies), in every
// subschema it reaches: the keys a record may name in clear. Any other key
// of the arguments is the model's choice, which may be data — a path, a
// token, a user name used as a key — whatever it looks like. A name only a
// $dynamicRef reaches is missed, and then named by its digest (safe).
func propertyNames(schema *jsonschema.Schema) map[string]bool {
	names := map[string]bool{}
	seen := map[*jsonschema.Schema]bool{}
	var walk func(s *jsonschema.Schema)
	walkAny := func(v any) {
		switch v := v.(type) {
		case *jsonschema.Schema:
			walk(v)
		case []*jsonschema.Schema:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk = func(s *jsonschema.Schema) {
		if s == nil || seen[s] {
			return
		}
		seen[s] = true
		for name, sub := range s.Properties {
			names[name] = true
			walk(sub)
		}
		for name, sub := range s.DependentSchemas {
			names[name] = true
			walk(sub)
		}
		for name, dep := range s.Dependencies {
			names[name] = true
			if list, ok := dep.([]string); ok {
				for _, n := range list {
					names[n] = true
				}
			}
			walkAny(dep)
		}
		for name, list := range s.DependentRequired {
			names[name] = true
			for _, n := range list {
				names[n] = true
			}
		}
		for _, n := range s.Required {
			names[n] = true
		}
		for _, sub := range s.PatternProperties {
			walk(sub)
		}
		if s.DynamicRef != nil {
			walk(s.DynamicRef.Ref)
		}
		for _, sub := range [...]*jsonschema.Schema{s.Ref, s.RecursiveRef, s.Not, s.If, s.Then, s.Else,
			s.PropertyNames, s.UnevaluatedProperties, s.Contains, s.Items2020, s.UnevaluatedItems} {
			walk(sub)
		}
		for _, subs := range [...][]*jsonschema.Schema{s.AllOf, s.AnyOf, s.OneOf, s.PrefixItems} {
			for _, sub := range subs {
				walk(sub)
			}
		}
		walkAny(s.AdditionalProperties)
		walkAny(s.Items)
		walkAny(s.AdditionalItems)
	}
	walk(schema)
	return names
}
