package pipeline

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/sharedos/toolshare/services/contract/jsonlimits"
)

// Argument limits (owned by jsonlimits). They run before the schema
// validator so that hostile input never reaches a recursive parser or the
// policy engine.
const (
	MaxArgumentsBytes = jsonlimits.MaxArgumentsBytes
	MaxArgumentsDepth = jsonlimits.MaxDepth
)

// frame is one open object or array while scanning arguments.
type frame struct {
	object    bool
	expectKey bool
	keys      map[string]struct{}
}

// valueDone notes that the open object's current member value is complete.
func valueDone(stack []frame) {
	if n := len(stack); n > 0 && stack[n-1].object {
		stack[n-1].expectKey = true
	}
}

// checkArguments enforces the structural rules on the raw bytes in one
// streaming pass: valid UTF-8, a single JSON object, nesting depth at most
// MaxArgumentsDepth, and no duplicate keys in any object (two parsers that
// disagree on which duplicate wins would let the policy and the handler see
// different arguments). json.Decoder.Token does not recurse, so a hostile
// 10^5-deep input is refused at depth 65 without stack growth.
func checkArguments(raw []byte) error {
	if len(raw) > MaxArgumentsBytes {
		return fmt.Errorf("%d bytes; the limit is %d", len(raw), MaxArgumentsBytes)
	}
	if !utf8.Valid(raw) {
		return errors.New("not valid UTF-8")
	}
	trimmed := bytes.TrimLeft(raw, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return errors.New("not a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var stack []frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return errors.New("not valid JSON")
		}
		if n := len(stack); n > 0 && stack[n-1].object && stack[n-1].expectKey {
			top := &stack[n-1]
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:n-1]
				valueDone(stack)
			} else {
				key, _ := tok.(string)
				if _, dup := top.keys[key]; dup {
					return fmt.Errorf("the key %q appears twice in one object", truncate(key, 64))
				}
				top.keys[key] = struct{}{}
				top.expectKey = false
				continue
			}
		} else {
			switch tok {
			case json.Delim('{'), json.Delim('['):
				if len(stack) >= MaxArgumentsDepth {
					return fmt.Errorf("nested deeper than %d levels", MaxArgumentsDepth)
				}
				f := frame{object: tok == json.Delim('{')}
				if f.object {
					f.expectKey = true
					f.keys = map[string]struct{}{}
				}
				stack = append(stack, f)
				continue
			case json.Delim(']'):
				stack = stack[:len(stack)-1]
				valueDone(stack)
			default:
				valueDone(stack)
			}
		}
		if len(stack) == 0 {
			// The top-level object is closed: nothing may follow it.
			if _, err := dec.Token(); err != io.EOF {
				return errors.New("more than one JSON value")
			}
			return nil
		}
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// validateSchema validates raw against schema and returns a reason naming
// the first failing location as a JSON pointer into the arguments.
func validateSchema(schema *jsonschema.Schema, raw []byte) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return errors.New("not valid JSON")
	}
	err = schema.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return errors.New("could not be validated")
	}
	leaf := ve
	for len(leaf.Causes) > 0 {
		leaf = leaf.Causes[0]
	}
	loc := "/"
	if len(leaf.InstanceLocation) > 0 {
		loc = ""
		for _, tok := range leaf.InstanceLocation {
			loc += "/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(tok)
		}
	}
	msg := "does not match the input schema"
	if out := leaf.BasicOutput(); out != nil && out.Error != nil {
		msg = out.Error.String()
	}
	return fmt.Errorf("at %s: %s", truncate(loc, 200), truncate(msg, 300))
}
