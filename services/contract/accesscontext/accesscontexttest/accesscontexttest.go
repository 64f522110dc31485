// Package accesscontexttest holds the contexts accesscontext.Check refuses,
// so every service that checks a context is tested on the same cases.
package accesscontexttest

import (
	"fmt"
	"strings"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/accesscontext"
)

// Case is one way a context breaks the rules: how to make a good context
// break it, and the field and a piece of the rule it is refused with.
// The services' tests share them, so every entry point is tested on the
// same cases (Bad).
type Case struct {
	Name        string
	Edit        func(*sharedosv1.AccessContext)
	Field, Rule string
}

// Bad is the contexts accesscontext.Check refuses, one rule each; the
// edits apply to a context with a principal, a tenant, one role and one
// attribute.
func Bad() []Case {
	long := strings.Repeat("p", accesscontext.MaxStringBytes+1)
	many := make([]string, accesscontext.MaxRoles+1)
	for i := range many {
		many[i] = fmt.Sprint("r", i)
	}
	return []Case{
		{"no principal", func(c *sharedosv1.AccessContext) { c.Principal = "" }, "context.principal", "must not be empty"},
		{"principal over 1024 bytes", func(c *sharedosv1.AccessContext) { c.Principal = long }, "context.principal", "at most 1024 bytes"},
		{"principal with an ANSI escape", func(c *sharedosv1.AccessContext) { c.Principal = "p\x1b[31m" }, "context.principal", "control or format"},
		{"principal with a C1 control", func(c *sharedosv1.AccessContext) { c.Principal = "p\u0085" }, "context.principal", "control or format"},
		{"principal not UTF-8", func(c *sharedosv1.AccessContext) { c.Principal = "p\xff" }, "context.principal", "valid UTF-8"},
		{"tenant over 1024 bytes", func(c *sharedosv1.AccessContext) { c.Tenant = long }, "context.tenant", "at most 1024 bytes"},
		{"tenant with a bidi override", func(c *sharedosv1.AccessContext) { c.Tenant = "acme\u202e" }, "context.tenant", "control or format"},
		{"257 roles", func(c *sharedosv1.AccessContext) { c.Roles = many }, "context.roles", "at most 256 roles"},
		{"an empty role", func(c *sharedosv1.AccessContext) { c.Roles = []string{""} }, "context.roles[0]", "1 to 1024 bytes"},
		{"a role over 1024 bytes", func(c *sharedosv1.AccessContext) { c.Roles = []string{"a", long} }, "context.roles[1]", "1 to 1024 bytes"},
		{"a role with a newline", func(c *sharedosv1.AccessContext) { c.Roles = []string{"a\nadmin"} }, "context.roles[0]", "control or format"},
		{"a role with a zero-width space", func(c *sharedosv1.AccessContext) { c.Roles = []string{"ad\u200bmin"} }, "context.roles[0]", "control or format"},
		{"an attribute value over 1024 bytes", func(c *sharedosv1.AccessContext) { c.Attributes = map[string]string{"k": long} }, "context.attributes", "at most 1024 bytes"},
		{"an attribute key over 1024 bytes", func(c *sharedosv1.AccessContext) { c.Attributes = map[string]string{long: "v"} }, "context.attributes", "at most 1024 bytes"},
		{"an attribute value with a C1 CSI", func(c *sharedosv1.AccessContext) { c.Attributes = map[string]string{"k": "v\u009b31m"} }, "context.attributes", "control or format"},
		{"an attribute key with a bidi isolate", func(c *sharedosv1.AccessContext) { c.Attributes = map[string]string{"k\u2066": "v"} }, "context.attributes", "control or format"},
	}
}
