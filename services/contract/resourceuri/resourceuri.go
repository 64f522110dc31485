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
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
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

// Normalize is uri in one spelling of those a reader may take for the
// same resource (RFC 3986, 6.2.2; RFC 3987, 3.1): the scheme and host in
// lower case; no userinfo, no empty or default port (http and ws 80, https
// and wss 443), no trailing dot on the host; percent-encoded unreserved
// characters decoded, and in the path sub-delims, ':' and '@' too; non-ASCII
// characters in Unicode NFC and percent-encoded as UTF-8; the hex of every
// escape in upper case ("TEST://X/%68idden" is "test://x/hidden"). What
// is inside a template's braces is left as written. A concrete URI is
// registered in this form, so a read in another spelling finds it: a URI
// registered on its own is not read through a template it also matches.
func Normalize(uri string) string {
	scheme, rest, ok := cutScheme(uri)
	if !ok {
		return escapes(uri, true)
	}
	var b strings.Builder
	b.WriteString(strings.ToLower(scheme) + ":")
	if after, ok := strings.CutPrefix(rest, "//"); ok {
		end := len(after)
		if i := strings.IndexAny(after, "/?#"); i >= 0 {
			end = i
		}
		b.WriteString("//" + authority(after[:end], strings.ToLower(scheme)))
		rest = after[end:]
	}
	path, tail := rest, ""
	if i := strings.IndexAny(rest, "?#"); i >= 0 {
		path, tail = rest[:i], rest[i:]
	}
	b.WriteString(escapes(path, true))
	b.WriteString(escapes(tail, false))
	return b.String()
}

// cutScheme splits uri at the colon after its scheme (RFC 3986, 3.1).
func cutScheme(uri string) (scheme, rest string, ok bool) {
	scheme, rest, ok = strings.Cut(uri, ":")
	if !ok || scheme == "" || !isAlpha(scheme[0]) {
		return "", "", false
	}
	for i := 1; i < len(scheme); i++ {
		if c := scheme[i]; !isAlpha(c) && !isDigit(c) && c != '+' && c != '-' && c != '.' {
			return "", "", false
		}
	}
	return scheme, rest, true
}

// defaultPorts are the ports a scheme's URIs leave out.
var defaultPorts = map[string]string{"http": "80", "https": "443", "ws": "80", "wss": "443"}

// authority is a in normal form (Normalize). One with a template
// expression keeps its userinfo, port and dots: only its case and escapes
// are normalised.
func authority(a, scheme string) string {
	a = escapes(a, false)
	if IsTemplate(a) {
		return outsideBraces(a, lowerKeepingEscapes)
	}
	if i := strings.LastIndexByte(a, '@'); i >= 0 {
		a = a[i+1:]
	}
	host, port := a, ""
	if i := strings.LastIndexByte(a, ':'); i >= 0 && !strings.Contains(a[i:], "]") && allDigits(a[i+1:]) {
		host, port = a[:i], a[i+1:]
	}
	host = lowerKeepingEscapes(host)
	if len(host) > 1 && strings.HasSuffix(host, ".") && !strings.HasSuffix(host, "..") && !strings.Contains(host, ":") {
		host = strings.TrimSuffix(host, ".")
	}
	if port == "" || port == defaultPorts[scheme] {
		return host
	}
	return host + ":" + port
}

// lowerKeepingEscapes is s in lower case but for the hex of its escapes.
func lowerKeepingEscapes(s string) string {
	b := []byte(strings.ToLower(s))
	for i := 0; i+2 < len(b); i++ {
		if b[i] == '%' && isHex(b[i+1]) && isHex(b[i+2]) {
			b[i+1], b[i+2] = upper(b[i+1]), upper(b[i+2])
			i += 2
		}
	}
	return string(b)
}

// outsideBraces applies f to the parts of s outside template expressions.
func outsideBraces(s string, f func(string) string) string {
	var b strings.Builder
	last := 0
	for _, loc := range Var.FindAllStringIndex(s, -1) {
		b.WriteString(f(s[last:loc[0]]))
		b.WriteString(s[loc[0]:loc[1]])
		last = loc[1]
	}
	b.WriteString(f(s[last:]))
	return b.String()
}

// escapes is s with its escapes and non-ASCII characters in normal form
// (Normalize); inPath decodes escaped sub-delims, ':' and '@' too, which
// a path segment may hold as they are. Template expressions are left as
// written.
func escapes(s string, inPath bool) string {
	return outsideBraces(s, func(s string) string {
		s = composed(s)
		var b strings.Builder
		for i := 0; i < len(s); i++ {
			c := s[i]
			if c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
				d, _ := hex.DecodeString(s[i+1 : i+3])
				i += 2
				if unreserved(d[0]) || inPath && pathChar(d[0]) {
					b.WriteByte(d[0])
				} else {
					b.WriteString(escaped(d[0]))
				}
				continue
			}
			if c >= utf8.RuneSelf {
				b.WriteString(escaped(c))
				continue
			}
			b.WriteByte(c)
		}
		return b.String()
	})
}

// composed is s with its escaped non-ASCII bytes decoded and, when it is
// then UTF-8, in NFC (a base letter and the combining mark after it are
// one character): escapes encodes the non-ASCII bytes again.
func composed(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			if d, _ := hex.DecodeString(s[i+1 : i+3]); d[0] >= utf8.RuneSelf {
				b.WriteByte(d[0])
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	if d := b.String(); utf8.ValidString(d) {
		return norm.NFC.String(d)
	}
	return s
}

func escaped(c byte) string { return "%" + strings.ToUpper(hex.EncodeToString([]byte{c})) }

func unreserved(c byte) bool {
	return isAlpha(c) || isDigit(c) || c == '-' || c == '.' || c == '_' || c == '~'
}

// pathChar: a sub-delim, ':' or '@', which a path segment holds as it is
// (RFC 3986, 3.3).
func pathChar(c byte) bool { return strings.IndexByte("!$&'()*+,;=:@", c) >= 0 }

func isAlpha(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
func isDigit(c byte) bool { return '0' <= c && c <= '9' }
func isHex(c byte) bool   { return isDigit(c) || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }
func upper(c byte) byte {
	if 'a' <= c && c <= 'z' {
		return c - 'a' + 'A'
	}
	return c
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return true
}
