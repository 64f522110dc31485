package config

import (
	"fmt"
	"strings"
)

// FieldError is one invalid setting: Field names where it came from
// ("flag --policy-dir" or "env SHAREDOS_POLICY_DIR"), Rule what is wrong.
type FieldError struct {
	Field string
	Rule  string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Rule }

// Errors collects every invalid setting so startup reports all of them at
// once. The zero value is ready to use.
type Errors []*FieldError

// Add records that flag name breaks rule: "flag --name: rule".
func (e *Errors) Add(name, rule string) {
	*e = append(*e, &FieldError{Field: "flag --" + name, Rule: rule})
}

// Addf is Add with a formatted rule.
func (e *Errors) Addf(name, format string, args ...any) {
	e.Add(name, fmt.Sprintf(format, args...))
}

// Err returns nil when nothing was recorded and e otherwise, so a Validate
// method can end with `return errs.Err()` without the nil-interface trap.
func (e Errors) Err() error {
	if len(e) == 0 {
		return nil
	}
	return e
}

// Error lists every problem, one per line after the first.
func (e Errors) Error() string {
	parts := make([]string, len(e))
	for i, fe := range e {
		parts[i] = fe.Error()
	}
	if len(parts) == 1 {
		return "invalid configuration: " + parts[0]
	}
	return "invalid configuration:\n  " + strings.Join(parts, "\n  ")
}

// Unwrap exposes the individual errors to errors.Is/As.
func (e Errors) Unwrap() []error {
	out := make([]error, len(e))
	for i, fe := range e {
		out[i] = fe
	}
	return out
}
