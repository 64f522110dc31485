package resourceuri

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// matchesByRegexp is matches as it was before templates were compiled
// once (a regexp built and run per template and call, which cost a
// 20,000-character URI 20 s of CPU against 62 long templates): the
// reference the compiled matcher must agree with, URI for URI.
func matchesByRegexp(tmpl, uri string) bool {
	var re strings.Builder
	re.WriteString("^")
	rest := tmpl
	var places []place
	for {
		loc := Var.FindStringIndex(rest)
		if loc == nil {
			re.WriteString(regexp.QuoteMeta(rest))
			break
		}
		re.WriteString(regexp.QuoteMeta(rest[:loc[0]]))
		re.WriteString(`([^/?#]+)`)
		places = append(places, placeOf(tmpl[:len(tmpl)-len(rest)+loc[0]]))
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
	for i, v := range m[1:] {
		if !segment(v) {
			return false
		}
		switch places[i] {
		case atHost:
			if strings.IndexFunc(v, func(r rune) bool { return !hostChar(r) }) >= 0 || !dottedDecimal(hostOf(uri)) {
				return false
			}
		case atQuery:
			if strings.ContainsAny(v, "&;") {
				return false
			}
		}
	}
	return true
}

// matchByRegexp is Match as it was (matchesByRegexp, first in byte order).
func matchByRegexp(registered []string, uri string) (string, bool) {
	if strings.ContainsAny(uri, "{}") {
		return "", false
	}
	if slices.Contains(registered, uri) {
		return uri, true
	}
	for _, r := range slices.Sorted(slices.Values(registered)) {
		if IsTemplate(r) && matchesByRegexp(r, uri) {
			return r, true
		}
	}
	return "", false
}

// Pieces the differential tests build templates and URIs of: separators,
// dots, escapes, a host and query's characters, non-ASCII (composed,
// decomposed, U+FFFD) and bytes that are not UTF-8.
var (
	diffTemplatePieces = []string{"s", "http", "file", "test", "://", ":", "/", "//", "?", "#", "&", ";", "=", ".", "..", "a", "b", "ab", "aa",
		"x", "-", "_", "~", "%2F", "%2e", "%41", "é", "e\u0301", "\ufffd", "\xff", "\xe2\x82", "@", ":80", "127.0.0.1", "q=",
		"{v}", "{v}", "{v}", "{v}{w}", "{}", "}", "{", "{a/b}", "{\xff}", "\t", " "}
	diffValuePieces = []string{"a", "b", "x", "aa", "ab", ".", "..", "/", "?", "#", "&", ";", "=", "%2F", "%2e%2e", "%5c", "%00", "%zz",
		"%41", "é", "e\u0301", "\ufffd", "\xff", "\xc3", "\xe2\x82", "\xed\xa0\x80", "127", "0x7f", "1", "@", ":", "-", "_", "\t", " ",
		"A", "\uff21", "q", "qq", "{", "}", "://", "http", "s"}
)

// diffTemplate is a random template of the pieces, each {v} numbered.
func diffTemplate(r *rand.Rand) string {
	var b strings.Builder
	for i := range 1 + r.IntN(8) {
		p := diffTemplatePieces[r.IntN(len(diffTemplatePieces))]
		p = strings.ReplaceAll(p, "{v}", fmt.Sprintf("{v%d}", i))
		b.WriteString(strings.ReplaceAll(p, "{w}", fmt.Sprintf("{w%d}", i)))
	}
	return b.String()
}

// diffURI is a URI made from tmpl: its {var}s given random values, or a
// random edit of such a URI, or random pieces.
func diffURI(r *rand.Rand, tmpl string) string {
	value := func() string {
		var b strings.Builder
		for range 1 + r.IntN(3) {
			b.WriteString(diffValuePieces[r.IntN(len(diffValuePieces))])
		}
		return b.String()
	}
	u := Var.ReplaceAllStringFunc(tmpl, func(string) string { return value() })
	switch r.IntN(6) {
	case 0: // a byte dropped
		if len(u) > 0 {
			i := r.IntN(len(u))
			u = u[:i] + u[i+1:]
		}
	case 1: // a piece inserted
		i := r.IntN(len(u) + 1)
		u = u[:i] + value() + u[i:]
	case 2:
		u = diffTemplate(r)
		u = Var.ReplaceAllStringFunc(u, func(string) string { return value() })
	}
	return u
}

// TestCompiledMatchAgreesWithRegexp: the compiled matcher reads every URI
// as the regexp did — the same template, or none — over random templates
// (separators, adjacent {var}s, non-ASCII and bytes that are not UTF-8 in
// both) and URIs made from them, edited, or random; and Match (and a
// Matcher) over sets of them picks the same registration.
func TestCompiledMatchAgreesWithRegexp(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 18))
	matched, compared := 0, 0
	for range 12000 {
		tmpl := diffTemplate(r)
		for range 8 {
			uri := diffURI(r, tmpl)
			compared++
			want := matchesByRegexp(tmpl, uri)
			if want {
				matched++
			}
			if got := matches(tmpl, uri); got != want {
				t.Fatalf("matches(%q, %q) = %v; the regexp says %v", tmpl, uri, got, want)
			}
		}
	}
	t.Logf("%d of %d URIs matched their template", matched, compared)
	if matched < compared/10 {
		t.Fatalf("only %d of %d URIs matched: the generator tests little", matched, compared)
	}
	for range 3000 {
		set := make([]string, 1+r.IntN(6))
		for i := range set {
			set[i] = diffTemplate(r)
		}
		m := NewMatcher(set)
		for range 8 {
			uri := diffURI(r, set[r.IntN(len(set))])
			if r.IntN(10) == 0 {
				uri = set[r.IntN(len(set))] // a registration itself
			}
			wantReg, wantOK := matchByRegexp(set, uri)
			if gotReg, gotOK := Match(set, uri); gotReg != wantReg || gotOK != wantOK {
				t.Fatalf("Match(%q, %q) = %q, %v; the regexp's %q, %v", set, uri, gotReg, gotOK, wantReg, wantOK)
			}
			if gotReg, gotOK := m.Match(uri); gotReg != wantReg || gotOK != wantOK {
				t.Fatalf("NewMatcher(%q).Match(%q) = %q, %v; the regexp's %q, %v", set, uri, gotReg, gotOK, wantReg, wantOK)
			}
		}
	}
}

// FuzzCompiledMatch: the compiled matcher agrees with the regexp on any
// template and URI (make fuzz runs it).
func FuzzCompiledMatch(f *testing.F) {
	for _, c := range [][2]string{
		{"test://template/{id}/data", "test://template/a:b/data"},
		{"http://{host}/{x}", "http://127.0.0.1/h"},
		{"test://a/{x}.{y}", "test://a/b.c.d"},
		{"s://{a}{b}", "s://x\u00e9"},
		{"s://\ufffd{a}", "s://\xffb"},
		{"test://q/api?id={id}", "test://q/api?id=7;x"},
		{"evil://a/{x}qqqq%03dqqqq{y}/z", "evil://a/qqqqqqq%03dqqqqqqqqq/z"},
	} {
		f.Add(c[0], c[1])
	}
	f.Fuzz(func(t *testing.T, tmpl, uri string) {
		if got, want := matches(tmpl, uri), matchesByRegexp(tmpl, uri); got != want {
			t.Errorf("matches(%q, %q) = %v; the regexp says %v", tmpl, uri, got, want)
		}
	})
}

// Has answers for the registrations as written: a template by its text,
// never by a URI it matches.
func TestMatcherHas(t *testing.T) {
	m := NewMatcher([]string{"a://x", "a://t/{id}"})
	for s, want := range map[string]bool{"a://x": true, "a://t/{id}": true, "a://t/7": false, "a://y": false} {
		if got := m.Has(s); got != want {
			t.Errorf("Has(%q) = %v, want %v", s, got, want)
		}
	}
	if (*Matcher)(nil).Has("a://x") {
		t.Error("a nil Matcher has a://x")
	}
}
