// Package resourceuri matches a concrete resource URI against registered
// resource URIs and RFC 6570 level-1 templates (ADR 0018): the one rule the
// kernel resolves a resources/read by and the bridge serves it by.
package resourceuri

import (
	"encoding/hex"
	"net/url"
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
// or '#' that is no dot-segment and holds no separator or NUL once
// percent-decoded ("..", "%2e%2e", "a%2Fb", "a%5cb"): a provider that
// decodes or normalises the URI would read outside the template. ok is
// false when none does (or uri has a brace: a template is not a
// resource).
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
		re.WriteString(`([^/?#]+)`)
		rest = rest[loc[1]:]
	}
	re.WriteString("$")
	x, err := regexp.Compile(re.String())
	if err != nil {
		return false
	}
	m := x.FindStringSubmatch(uri)
	if m == nil {
		return false
	}
	for _, v := range m[1:] {
		if !segment(v) {
			return false
		}
	}
	return true
}

// segment reports whether a template variable's value stays one segment
// whether or not whoever reads the URI decodes it.
func segment(v string) bool {
	d, err := url.PathUnescape(v)
	return err == nil && d != "." && d != ".." && !strings.ContainsAny(d, "/\\\x00")
}

// Normalize is uri with every percent-encoded unreserved character decoded
// and the hex digits of the escapes left in upper case (RFC 3986, 6.2.2.1
// and 6.2.2.2): one spelling for URIs that differ only in percent-encoding
// ("test://x/%68idden" is "test://x/hidden"). A concrete URI is registered
// in this form, so a read in another percent-encoding finds it: a URI
// registered on its own is not read through a template it also matches.
func Normalize(uri string) string {
	if !strings.Contains(uri, "%") {
		return uri
	}
	var b strings.Builder
	for i := 0; i < len(uri); i++ {
		if uri[i] == '%' && i+2 < len(uri) {
			if d, err := hex.DecodeString(uri[i+1 : i+3]); err == nil {
				if unreserved(d[0]) {
					b.WriteByte(d[0])
				} else {
					b.WriteString("%" + strings.ToUpper(uri[i+1:i+3]))
				}
				i += 2
				continue
			}
		}
		b.WriteByte(uri[i])
	}
	return b.String()
}

func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}
