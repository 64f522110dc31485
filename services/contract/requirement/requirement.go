package requirement

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"unicode/utf8"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
)

// ErrArguments is wrapped by every error caused by the call's arguments (a
// missing placeholder argument, a value of the wrong type, a NUL byte): the
// kernel answers those failed/invalid_arguments.
var ErrArguments = errors.New("requirement: arguments do not satisfy the requirement")

// ErrRequirement is wrapped by every error caused by the registration itself
// (no requirement, an empty action, a malformed template): a catalogue
// defect, never the caller's fault.
var ErrRequirement = errors.New("requirement: invalid requirement")

// Error names the offending field and the rule it broke.
type Error struct {
	// Field is "arguments.<name>" for an argument, or "requirement.<field>".
	Field string
	// Rule is a short machine-readable rule name, e.g. "required", "no_nul".
	Rule string
	// Detail is a human-readable explanation.
	Detail string
	kind   error
}

func (e *Error) Error() string { return e.Field + ": " + e.Detail + " (" + e.Rule + ")" }

// Unwrap returns ErrArguments or ErrRequirement.
func (e *Error) Unwrap() error { return e.kind }

func argErr(name, rule, format string, a ...any) error {
	return &Error{Field: "arguments." + name, Rule: rule, Detail: fmt.Sprintf(format, a...), kind: ErrArguments}
}

func reqErr(field, rule, format string, a ...any) error {
	return &Error{Field: "requirement." + field, Rule: rule, Detail: fmt.Sprintf(format, a...), kind: ErrRequirement}
}

// MaxValueBytes caps one placeholder value; a longer value is not a path or
// identifier any policy should be asked about.
const MaxValueBytes = 4096

// MaxResourceBytes caps a resolved resource: authz-svc refuses a longer one,
// so the kernel refuses it first, as the arguments' fault
// (failed/invalid_arguments), never as the policy's.
const MaxResourceBytes = 4096

// Resolve returns the action and the concrete resource req demands for a call
// with argsJSON (a JSON object); it is ResolveValues over the decoded
// object, for callers that hold only the bytes (sharedosctl).
func Resolve(req *sharedosv1.Requirement, argsJSON []byte) (action, resource string, err error) {
	var args map[string]any
	if parts, err := parseTemplate(req.GetResource()); err == nil && hasPlaceholder(parts) {
		dec := json.NewDecoder(bytes.NewReader(argsJSON))
		dec.UseNumber()
		if err := dec.Decode(&args); err != nil || args == nil {
			return "", "", argErr("", "object", "arguments must be a JSON object")
		}
	}
	return ResolveValues(req, args)
}

// ResolveValues returns the action and the concrete resource req demands for
// a call whose arguments decoded to args (numbers as json.Number, as
// encoding/json's UseNumber gives them). Each {name} placeholder of
// req.Resource is replaced by the top-level argument name, cleaned per
// req.PathCleaning (unspecified means POSIX). String, number and boolean
// values are accepted; numbers keep their JSON spelling. "{{" and "}}" are
// literal braces. An empty template yields an empty resource (an
// action-only requirement).
func ResolveValues(req *sharedosv1.Requirement, args map[string]any) (action, resource string, err error) {
	if req == nil {
		return "", "", reqErr("", "required", "the tool declares no requirement")
	}
	if req.GetAction() == "" {
		return "", "", reqErr("action", "required", "action is empty")
	}
	cleaning := req.GetPathCleaning()
	switch cleaning {
	case sharedosv1.PathCleaning_PATH_CLEANING_UNSPECIFIED:
		cleaning = sharedosv1.PathCleaning_PATH_CLEANING_POSIX
	case sharedosv1.PathCleaning_PATH_CLEANING_NONE, sharedosv1.PathCleaning_PATH_CLEANING_POSIX:
	default:
		return "", "", reqErr("path_cleaning", "enum", "unknown path cleaning %d", int32(cleaning))
	}
	parts, err := parseTemplate(req.GetResource())
	if err != nil {
		return "", "", err
	}
	if hasPlaceholder(parts) && args == nil {
		return "", "", argErr("", "object", "arguments must be a JSON object")
	}
	var b strings.Builder
	for _, p := range parts {
		if !p.placeholder {
			b.WriteString(p.text)
			continue
		}
		raw, ok := args[p.text]
		if !ok {
			return "", "", argErr(p.text, "required", "argument %q is required by the resource template", p.text)
		}
		v, err := scalar(p.text, raw)
		if err != nil {
			return "", "", err
		}
		if strings.IndexByte(v, 0) >= 0 {
			return "", "", argErr(p.text, "no_nul", "argument %q contains a NUL byte", p.text)
		}
		if len(v) > MaxValueBytes {
			return "", "", argErr(p.text, "max_length", "argument %q is longer than %d bytes", p.text, MaxValueBytes)
		}
		if cleaning == sharedosv1.PathCleaning_PATH_CLEANING_POSIX {
			v = CleanPOSIX(v)
		}
		b.WriteString(v)
	}
	if b.Len() > MaxResourceBytes {
		return "", "", argErr("", "max_length", "the resource these arguments name is longer than %d bytes", MaxResourceBytes)
	}
	return req.GetAction(), b.String(), nil
}

// CleanPOSIX is the POSIX cleaning rule: backslashes become slashes, the
// value is made absolute and cleaned lexically (path.Clean("/"+p)). The
// result always starts with "/" and never contains "." or ".." elements.
func CleanPOSIX(p string) string {
	return path.Clean("/" + strings.ReplaceAll(p, `\`, "/"))
}

// Validate checks a requirement at registration time, so a tool whose
// requirement can never resolve is rejected before it is published.
func Validate(req *sharedosv1.Requirement) error {
	if req == nil {
		return reqErr("", "required", "the tool declares no requirement")
	}
	if req.GetAction() == "" {
		return reqErr("action", "required", "action is empty")
	}
	if _, ok := sharedosv1.PathCleaning_name[int32(req.GetPathCleaning())]; !ok {
		return reqErr("path_cleaning", "enum", "unknown path cleaning %d", int32(req.GetPathCleaning()))
	}
	_, err := parseTemplate(req.GetResource())
	return err
}

// Placeholders returns the argument names a resource template refers to, in
// order of appearance (duplicates kept).
func Placeholders(template string) ([]string, error) {
	parts, err := parseTemplate(template)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, p := range parts {
		if p.placeholder {
			names = append(names, p.text)
		}
	}
	return names, nil
}

type part struct {
	text        string
	placeholder bool
}

func hasPlaceholder(parts []part) bool {
	for _, p := range parts {
		if p.placeholder {
			return true
		}
	}
	return false
}

func parseTemplate(t string) ([]part, error) {
	if t == "" {
		// No resource: the policy decides on the action and the tool alone.
		return nil, nil
	}
	if !utf8.ValidString(t) || strings.IndexByte(t, 0) >= 0 {
		return nil, reqErr("resource", "utf8", "resource template must be valid UTF-8 without NUL")
	}
	var parts []part
	var lit strings.Builder
	for i := 0; i < len(t); {
		c := t[i]
		switch {
		case c == '{' && i+1 < len(t) && t[i+1] == '{':
			lit.WriteByte('{')
			i += 2
		case c == '}' && i+1 < len(t) && t[i+1] == '}':
			lit.WriteByte('}')
			i += 2
		case c == '{':
			end := strings.IndexByte(t[i+1:], '}')
			if end < 0 {
				return nil, reqErr("resource", "template", "unclosed '{' at byte %d", i)
			}
			name := t[i+1 : i+1+end]
			if !validArgName(name) {
				return nil, reqErr("resource", "template", "placeholder {%s} must name a top-level argument ([A-Za-z0-9_-]+)", name)
			}
			if lit.Len() > 0 {
				parts = append(parts, part{text: lit.String()})
				lit.Reset()
			}
			parts = append(parts, part{text: name, placeholder: true})
			i += end + 2
		case c == '}':
			return nil, reqErr("resource", "template", "unmatched '}' at byte %d", i)
		default:
			lit.WriteByte(c)
			i++
		}
	}
	if lit.Len() > 0 {
		parts = append(parts, part{text: lit.String()})
	}
	return parts, nil
}

func validArgName(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// scalar renders one argument value: a string as its content, a number or
// boolean as its JSON text. Objects, arrays and null have no single resource
// spelling and are refused.
func scalar(name string, v any) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case bool:
		return strconv.FormatBool(v), nil
	case json.Number:
		return v.String(), nil
	default:
		return "", argErr(name, "type", "argument %q must be a string, number or boolean", name)
	}
}
