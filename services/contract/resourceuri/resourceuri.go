// Package resourceuri matches a concrete resource URI against registered
// resource URIs and RFC 6570 level-1 templates (ADR 0018): the one rule the
// kernel resolves a resources/read by and the bridge serves it by.
package resourceuri

import (
	"regexp"
	"slices"
	"strings"
)

// Var is one template expression, {name}.
var Var = regexp.MustCompile(`\{([^{}]*)\}`)

// IsTemplate reports whether uri has a {var}.
func IsTemplate(uri string) bool { return Var.MatchString(uri) }

// Match returns the registration a concrete URI reads: the one registered
// with exactly that URI, else the first (in byte order) template it
// matches, each {var} standing for one non-empty segment without '/', '?'
// or '#'; ok is false when none does (or uri has a brace: a template is not
// a resource).
func Match(registered []string, uri string) (string, bool) {
	if strings.ContainsAny(uri, "{}") {
		return "", false
	}
	if slices.Contains(registered, uri) {
		return uri, true
	}
	for _, r := range slices.Sorted(slices.Values(registered)) {
		if IsTemplate(r) && matches(r, uri) {
			return r, true
		}
	}
	return "", false
}

func matches(tmpl, uri string) bool {
	var re strings.Builder
	re.WriteString("^")
	rest := tmpl
	for {
		loc := Var.FindStringIndex(rest)
		if loc == nil {
			re.WriteString(regexp.QuoteMeta(rest))
			break
		}
		re.WriteString(regexp.QuoteMeta(rest[:loc[0]]))
		re.WriteString(`[^/?#]+`)
		rest = rest[loc[1]:]
	}
	re.WriteString("$")
	m, err := regexp.MatchString(re.String(), uri)
	return err == nil && m
}
