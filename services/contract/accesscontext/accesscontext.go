// Package accesscontext owns the rules an AccessContext (principal, tenant,
// roles, attributes) must keep: the limits authz-svc evaluates a policy
// under, and the characters every one of its strings may hold. bridge-svc
// (OpenTurn, a user token's claims), the kernel (GrantTurn), the catalogue
// (ListTools) and authz-svc (Authorize, FilterTools) all check a context
// with Check, so a context one of them takes is one all of them take, and
// a bad one is refused where it enters, as the caller's fault
// (InvalidArgument), never later as a service that failed.
package accesscontext

import (
	"fmt"
	"sort"
	"unicode"
	"unicode/utf8"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
)

const (
	// MaxStringBytes bounds the principal, the tenant, each role and each
	// attribute key and value.
	MaxStringBytes = 1024
	// MaxRoles bounds the number of roles in a context.
	MaxRoles = 256
)

// Error is a context that breaks a rule: the field (context.principal,
// context.tenant, context.roles, context.roles[i] or context.attributes)
// and the rule, safe to show the caller (it
// never quotes the value).
type Error struct {
	Field, Rule string
}

func (e *Error) Error() string { return e.Field + ": " + e.Rule }

// Check reports the first rule c breaks, or nil. A nil c is refused
// (field "context"): only the catalogue's admin listing goes without a
// context, and it never calls Check.
func Check(c *sharedosv1.AccessContext) *Error {
	if c == nil {
		return &Error{"context", "is required"}
	}
	if c.GetPrincipal() == "" {
		return &Error{"context.principal", "must not be empty"}
	}
	if rule := stringRule(c.GetPrincipal()); rule != "" {
		return &Error{"context.principal", rule}
	}
	if rule := stringRule(c.GetTenant()); rule != "" {
		return &Error{"context.tenant", rule}
	}
	if n := len(c.GetRoles()); n > MaxRoles {
		return &Error{"context.roles", fmt.Sprintf("must hold at most %d roles, got %d", MaxRoles, n)}
	}
	for i, r := range c.GetRoles() {
		field := fmt.Sprintf("context.roles[%d]", i)
		if r == "" || len(r) > MaxStringBytes {
			return &Error{field, fmt.Sprintf("must be 1 to %d bytes", MaxStringBytes)}
		}
		if rule := stringRule(r); rule != "" {
			return &Error{field, rule}
		}
	}
	// In key order: the same context is refused for the same reason.
	keys := make([]string, 0, len(c.GetAttributes()))
	for k := range c.GetAttributes() {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if len(k) > MaxStringBytes || len(c.GetAttributes()[k]) > MaxStringBytes {
			return &Error{"context.attributes", fmt.Sprintf("keys and values must be at most %d bytes", MaxStringBytes)}
		}
		if rule := Printable(k); rule != "" {
			return &Error{"context.attributes", "keys " + rule}
		}
		if rule := Printable(c.GetAttributes()[k]); rule != "" {
			return &Error{"context.attributes", "values " + rule}
		}
	}
	return nil
}

// stringRule is the rule a principal, tenant or role breaks beyond being
// empty, or "".
func stringRule(s string) string {
	if len(s) > MaxStringBytes {
		return fmt.Sprintf("must be at most %d bytes", MaxStringBytes)
	}
	return Printable(s)
}

// Printable is the rule s breaks as a declared string (a context's, a
// harness name, a declared model), or "": it must be valid UTF-8 without
// control characters (Unicode Cc: C0, DEL and C1, ANSI escapes among them)
// or format characters (Unicode Cf: bidi overrides and isolates,
// zero-width characters, tag characters). Such a string is printed in
// logs, records and operator tables, where these characters hide or
// rewrite what a reader sees. Letters of any script are printable:
// accented names and CJK pass.
func Printable(s string) string {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size <= 1 {
			return fmt.Sprintf("must be valid UTF-8 (byte %d is not)", i)
		}
		if unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r) {
			return fmt.Sprintf("must not hold control or format characters (U+%04X at byte %d)", r, i)
		}
		i += size
	}
	return ""
}
