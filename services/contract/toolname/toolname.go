package toolname

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

const (
	// MaxLen is the ToolNameSchema length limit, in characters (= bytes).
	MaxLen = 128
	// MaxIdentifierLen is the IdentifierSchema length limit, in bytes.
	MaxIdentifierLen = 256
	// MaxNamespaceLen is the NamespaceSchema length limit: a namespace
	// leaves room within MaxLen for the '.' and a one-character local name.
	MaxNamespaceLen = MaxLen - 2

	// RuleToolName names ToolNameSchema in errors.
	RuleToolName = "ToolNameSchema"
	// RuleIdentifier names IdentifierSchema in errors.
	RuleIdentifier = "IdentifierSchema"
	// RuleQualified names the extra rule Parse applies to a dotted name.
	RuleQualified = "QualifiedToolName"
	// RuleNamespace names NamespaceSchema in errors.
	RuleNamespace = "NamespaceSchema"

	toolNameSet   = "[A-Za-z0-9_.-]"
	identifierSet = `[\x21-\x7E]`
	namespaceSet  = "[A-Za-z0-9_-]"
)

// ErrInvalid matches every *Error with errors.Is.
var ErrInvalid = errors.New("invalid name or identifier")

// Error reports which field broke which rule, and where.
type Error struct {
	Field  string // the input field, e.g. "name", "identifier", "turnId"
	Rule   string // RuleToolName, RuleIdentifier or RuleQualified
	Detail string // what is wrong, e.g. "length 129 exceeds 128"
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s: violates %s: %s", e.Field, e.Rule, e.Detail)
}

// Unwrap lets callers test errors.Is(err, ErrInvalid) without a type switch.
func (e *Error) Unwrap() error { return ErrInvalid }

// Validate checks name against ToolNameSchema: 1–128 characters, each of
// [A-Za-z0-9_.-]. The error, if any, is an *Error with Field "name".
func Validate(name string) error { return ValidateField("name", name) }

// ValidateField is Validate with the caller's field name in the error, for
// inputs where the tool name travels under another key (e.g. "tool").
func ValidateField(field, name string) error {
	if name == "" {
		return &Error{Field: field, Rule: RuleToolName, Detail: "empty; must be 1–128 characters of " + toolNameSet}
	}
	// Characters before length: a long name with a bad character is reported
	// for the character, and once every byte is ASCII the byte length is the
	// character length the rule speaks of.
	for i := 0; i < len(name); i++ {
		if !isToolNameByte(name[i]) {
			return &Error{Field: field, Rule: RuleToolName, Detail: badChar(name, i, toolNameSet)}
		}
	}
	if len(name) > MaxLen {
		return &Error{Field: field, Rule: RuleToolName, Detail: fmt.Sprintf("length %d exceeds %d", len(name), MaxLen)}
	}
	return nil
}

// ValidateIdentifier checks id against IdentifierSchema: 1–256 bytes, each
// printable ASCII other than space ([\x21-\x7E]). The error, if any, is an
// *Error with Field "identifier".
func ValidateIdentifier(id string) error { return ValidateIdentifierField("identifier", id) }

// ValidateIdentifierField is ValidateIdentifier with the caller's field name
// (e.g. "turnId", "callId", "principal") in the error.
func ValidateIdentifierField(field, id string) error {
	if id == "" {
		return &Error{Field: field, Rule: RuleIdentifier, Detail: "empty; must be 1–256 bytes of " + identifierSet}
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < 0x21 || c > 0x7E {
			return &Error{Field: field, Rule: RuleIdentifier, Detail: badChar(id, i, identifierSet)}
		}
	}
	if len(id) > MaxIdentifierLen {
		return &Error{Field: field, Rule: RuleIdentifier, Detail: fmt.Sprintf("length %d bytes exceeds %d", len(id), MaxIdentifierLen)}
	}
	return nil
}

// ValidateNamespaceField checks ns against NamespaceSchema, the rule of a
// namespace given on its own (an upstream provider's) of which every tool
// name is ns + "." + a local name: 1–126 characters, each of [A-Za-z0-9_-].
// It is exactly what Parse can return as Namespace, less the length a
// local name needs: ToolNameSchema's characters but '.', which would move
// the first segment. The error, if any, is an *Error with Field field.
func ValidateNamespaceField(field, ns string) error {
	if ns == "" {
		return &Error{Field: field, Rule: RuleNamespace, Detail: fmt.Sprintf("empty; must be 1–%d characters of %s", MaxNamespaceLen, namespaceSet)}
	}
	for i := 0; i < len(ns); i++ {
		if c := ns[i]; !isKeyByte(c) && c != '-' {
			detail := badChar(ns, i, namespaceSet)
			if c == '.' {
				detail += ": a namespace is the tool names' first segment, which ends at the first '.'"
			}
			return &Error{Field: field, Rule: RuleNamespace, Detail: detail}
		}
	}
	if len(ns) > MaxNamespaceLen {
		return &Error{Field: field, Rule: RuleNamespace, Detail: fmt.Sprintf("length %d exceeds %d (a tool name, namespace.tool, is at most %d)", len(ns), MaxNamespaceLen, MaxLen)}
	}
	return nil
}

// Qualified is a tool name split into its provider namespace and the
// provider-local part.
type Qualified struct {
	Namespace string // "github" for github.search; "" for a name without a dot
	Local     string // "search" for github.search; the whole name when undotted
}

// String reassembles the canonical name.
func (q Qualified) String() string {
	if q.Namespace == "" {
		return q.Local
	}
	return q.Namespace + "." + q.Local
}

// Parse validates name against ToolNameSchema and splits it at the first dot.
// A name without a dot has an empty Namespace. A leading or trailing dot is
// refused (RuleQualified): ".search" would claim a namespace and name none,
// and "github." names no tool, and either would make Namespace == "" stop
// meaning "not qualified".
func Parse(name string) (Qualified, error) {
	if err := Validate(name); err != nil {
		return Qualified{}, err
	}
	ns, local, dotted := strings.Cut(name, ".")
	if !dotted {
		return Qualified{Local: name}, nil
	}
	if ns == "" {
		return Qualified{}, &Error{Field: "name", Rule: RuleQualified, Detail: "leading '.' leaves the namespace empty"}
	}
	if local == "" {
		return Qualified{}, &Error{Field: "name", Rule: RuleQualified, Detail: "trailing '.' leaves the local name empty"}
	}
	return Qualified{Namespace: ns, Local: local}, nil
}

// FoldedKey is the uniqueness key of a tool name: CollisionKey ('.' and '-'
// read as '_') compared case-insensitively. Two names with the same folded
// key would be indistinguishable to a harness that rewrites separators,
// case-folds, or both (files.read / files_read / Files_Read), which is how
// one provider could shadow another's tool. It is the one definition every
// store and check uses.
func FoldedKey(name string) string { return strings.ToLower(CollisionKey(name)) }

// CollisionKey is the name a harness may turn name into: every character
// outside [A-Za-z0-9_] becomes '_'. For a name that satisfies ToolNameSchema
// that is exactly '.' → '_' and '-' → '_', so files.read, files-read and
// files_read share the key files_read. Any other character (only possible
// in an invalid name) becomes one '_' per character, so the function is
// total and never panics.
func CollisionKey(name string) string {
	clean := true
	for i := 0; i < len(name); i++ {
		if !isKeyByte(name[i]) {
			clean = false
			break
		}
	}
	if clean {
		return name
	}
	var b strings.Builder
	b.Grow(len(name))
	for _, r := range name {
		if r < utf8.RuneSelf && isKeyByte(byte(r)) {
			b.WriteByte(byte(r))
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// Collision is two distinct names that a harness would present as one.
type Collision struct {
	Key    string // the shared CollisionKey
	First  string // the name seen first
	Second string // the later name with the same key
}

func (c Collision) Error() string {
	return fmt.Sprintf("names %q and %q collide as %q once a harness rewrites '.' and '-' to '_'", c.First, c.Second, c.Key)
}

// FindCollision returns the first pair of distinct names with the same
// CollisionKey, in input order. Repeated identical names are not a
// collision (they are one tool); callers that care reject duplicates
// separately.
func FindCollision(names []string) (Collision, bool) {
	seen := make(map[string]string, len(names))
	for _, n := range names {
		k := CollisionKey(n)
		if prev, ok := seen[k]; ok {
			if prev != n {
				return Collision{Key: k, First: prev, Second: n}, true
			}
			continue
		}
		seen[k] = n
	}
	return Collision{}, false
}

func isKeyByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

func isToolNameByte(c byte) bool { return isKeyByte(c) || c == '.' || c == '-' }

// badChar describes the character starting at byte i of s, which is not in set.
func badChar(s string, i int, set string) string {
	r, size := utf8.DecodeRuneInString(s[i:])
	if r == utf8.RuneError && size <= 1 {
		return fmt.Sprintf("byte 0x%02X at byte %d is not valid UTF-8 and not in %s", s[i], i, set)
	}
	return fmt.Sprintf("character U+%04X at byte %d is not in %s", r, i, set)
}
