package resourceuri_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sharedos/toolshare/services/contract/resourceuri"
)

// TestMatch: a concrete URI reads the registration with exactly
// its URI, else a template whose {var} each stand for one segment.
func TestMatch(t *testing.T) {
	pinned := []string{"test://static-text", "test://template/{id}/data", "test://a/{x}.{y}", "http://{host}/{x}", "test://q/api?id={id}", "users://{id}/profile", "test://x/doc#{f}"}
	for uri, want := range map[string]string{
		"test://static-text":        "test://static-text",
		"test://template/123/data":  "test://template/{id}/data",
		"test://a/b.c":              "test://a/{x}.{y}",
		"test://template//data":     "",
		"test://template/1/2/data":  "",
		"test://template/1/data/x":  "",
		"test://nonexistent":        "",
		"test://template/{id}/data": "",
		// A value stays one segment, decoded or not.
		"test://template/..%2Fsecret/data": "",
		"test://template/%2e%2e/data":      "",
		"test://template/../data":          "",
		"test://template/./data":           "",
		"test://template/a%5cb/data":       "",
		"test://template/a\\b/data":        "",
		"test://template/a%00/data":        "",
		"test://template/a%zz/data":        "",
		"test://template/a%20b/data":       "test://template/{id}/data",
		"test://template/file%2etxt/data":  "test://template/{id}/data",
		"test://template/.../data":         "test://template/{id}/data",
		// No userinfo, port or other name than ASCII where an http
		// template has a host.
		"http://u@internal/h": "",
		"http://internal/u@h": "http://{host}/{x}",
		"http://internal:1/h": "",
		// Characters a reader drops or trims (found by review).
		"test://template/hid\tden/data": "",
		"test://template/.\t./data":     "",
		"test://template/secret /data":  "",
		"test://template/a|b/data":      "",
		// A host is ASCII, an IPv4 address dotted-decimal.
		"http://\uff21_b/h":    "",
		"http://a_b-c.d/h":     "http://{host}/{x}",
		"http://2130706433/h":  "",
		"http://127.1/h":       "",
		"http://0x7f.0.0.1/h":  "",
		"http://127.0.0.1/h":   "http://{host}/{x}",
		"http://127.000.0.1/h": "",
		// No other parameter in a query's value.
		"test://q/api?id=7":      "test://q/api?id={id}",
		"test://q/api?id=7&id=8": "",
		"test://q/api?id=7;x":    "",
		"test://q/api?id=a+b":    "test://q/api?id={id}",
		"test://q/api?id=YWJj==": "test://q/api?id={id}",
		// Another scheme's authority is an opaque name.
		"users://123/profile": "users://{id}/profile",
		"users://2.0/profile": "users://{id}/profile",
		"users://u@x/profile": "users://{id}/profile",
		"test://x/doc#a=b":    "test://x/doc#{f}",
	} {
		got, ok := resourceuri.Match(pinned, uri)
		if got != want || ok != (want != "") {
			t.Errorf("MatchResource(%q) = %q, %v; want %q", uri, got, ok, want)
		}
	}
}

// Normalize decodes percent-encoded unreserved characters only, and
// upper-cases the hex of the escapes it keeps (RFC 3986, 6.2.2.1–2).
func TestNormalize(t *testing.T) {
	for in, want := range map[string]string{
		"test://template/%68idden/data": "test://template/hidden/data",
		"test://x/%7e%2D%2e%5F%41%7A":   "test://x/~-._Az",
		"test://x/a%2fb":                "test://x/a%2Fb",
		"test://x/a%20b%3f":             "test://x/a%20b%3F",
		"test://x/100%":                 "test://x/100%",
		"test://x/%zz%4":                "test://x/%zz%4",
		"test://x/plain":                "test://x/plain",
		"test://x/%2525":                "test://x/%2525",
	} {
		if got := resourceuri.Normalize(in); got != want {
			t.Errorf("Normalize(%q) = %q, want %q", in, got, want)
		}
	}
}

// Key decodes percent-encoded unreserved characters (and, in the
// path, sub-delims, ':' and '@'; in the query, those that structure it
// not), upper-cases the hex of the escapes it keeps, lower-cases scheme and
// host (IDNA for a non-ASCII one), drops the fragment, empty and default
// ports, a port's leading zeros, a host's trailing dot and dot segments,
// gives a special scheme's empty path "/", folds file: spellings and case,
// reads '+' in a query as a space, and writes non-ASCII characters NFC
// (across escapes) and percent-encoded (RFC 3986, 6.2.2; RFC 3987, 3.1).
// Template expressions stay as written.
func TestKey(t *testing.T) {
	for in, want := range map[string]string{
		"test://template/%68idden/data": "test://template/hidden/data",
		"test://x/%7e%2D%2e%5F%41%7A":   "test://x/~-._Az",
		"test://x/a%2fb":                "test://x/a%2Fb",
		"test://x/a%20b%3f":             "test://x/a%20b%3F",
		"test://x/100%":                 "test://x/100%25",
		"test://x/%zz%4":                "test://x/%25zz%254",
		"test://x/%%321":                "test://x/%2521",
		"test://x/a b\"<>\\^`|":         "test://x/a%20b%22%3C%3E%5C%5E%60%7C",
		"test://x/plain":                "test://x/plain",
		"test://x/%2525":                "test://x/%2525",
		// Case of scheme and host; not of the path.
		"TEST://Host.Example/Path": "test://host.example/Path",
		"test://%49NTERNAL/x":      "test://internal/x",
		"test://h%c3%89/x":         "test://xn--h-bga/x",
		// The authority: userinfo, ports, a trailing dot.
		"http://user:pw@Internal/x": "http://user:pw@internal/x",
		"postgres://alice@db/t":     "postgres://alice@db/t",
		"http://internal:80/x":      "http://internal/x",
		"https://internal:443/x":    "https://internal/x",
		"http://internal:/x":        "http://internal/x",
		"http://internal:8080/x":    "http://internal:8080/x",
		"http://internal:080/x":     "http://internal/x",
		"http://internal:08080/x":   "http://internal:8080/x",
		"test://internal:00/x":      "test://internal:0/x",
		"http://CAF%C3%89/h":        "http://xn--caf-dma/h",
		"http://caf\u00e9/h":        "http://xn--caf-dma/h",
		"http://XN--CAF-DMA/h":      "http://xn--caf-dma/h",
		"https://internal:80/x":     "https://internal:80/x",
		"http://internal./x":        "http://internal/x",
		"http://[::1]:80/x":         "http://[::1]/x",
		"http://[::1]/x":            "http://[::1]/x",
		// Sub-delims, ':' and '@' in the path; not in the query.
		"test://x/a%21b%3A%40%3d%2C": "test://x/a!b:@=,",
		"test://x/s?q=a%26b%3D":      "test://x/s?q=a%26b%3D",
		"test://x/s?q=a%21%2f%3F%2B": "test://x/s?q=a!/?%2B",
		// Non-ASCII: raw or escaped, composed or not, one spelling.
		"test://x/caf\u00e9":    "test://x/caf%C3%A9",
		"test://x/caf%c3%a9":    "test://x/caf%C3%A9",
		"test://x/cafe\u0301":   "test://x/caf%C3%A9",
		"test://x/cafe%CC%81":   "test://x/caf%C3%A9",
		"test://x/caf%65%CC%81": "test://x/caf%C3%A9",
		"test://x/a%3D%CC%B8":   "test://x/a%E2%89%A0",
		"test://x/%ff%fe":       "test://x/%FF%FE",
		// Templates keep their expressions.
		"test://{Host}/{Name}":      "test://{Host}/{Name}",
		"HTTP://{user}@{host}:80/x": "http://{user}@{host}:80/x",
		"test://x/{v\u00e9}/%68":    "test://x/{v\u00e9}/h",
		// Not absolute: only escapes.
		"no-scheme/%68%21": "no-scheme/h!",
		// What a WHATWG parser or a reader takes for the same resource
		// (found by review): a fragment, an empty path, file:
		// spellings, ftp's port, dot segments, '+' in a query.
		"test://x/doc#a":                 "test://x/doc",
		"http://internal":                "http://internal/",
		"https://internal?q":             "https://internal/?q",
		"test://internal":                "test://internal",
		"file://localhost/srv/Secret":    "file:///srv/secret",
		"file:/srv/secret":               "file:///srv/secret",
		"file:srv/x":                     "file:srv/x",
		"file:///srv/%C3%89t%C3%A9":      "file:///srv/%C3%A9t%C3%A9",
		"ftp://files:21/x":               "ftp://files/x",
		"http://internal/a/../secret":    "http://internal/secret",
		"http://internal/a/./b/%2e%2e/c": "http://internal/a/c",
		"test://x/a/..":                  "test://x/",
		"test://x/s?q=a+b":               "test://x/s?q=a%20b",
	} {
		if got := resourceuri.Key(in); got != want {
			t.Errorf("Key(%q) = %q, want %q", in, got, want)
		}
		if got := resourceuri.Key(want); got != want {
			t.Errorf("Key(%q) = %q: a key is its own", want, got)
		}
	}
}

// FuzzKey: a key is its own key.
func FuzzKey(f *testing.F) {
	for _, s := range []string{"TEST://U@H.:80/a%21%c3%a9?q=%26#f", "http://[::1]:/x", "x:%e2%82", "a://{h}/{v}%2f",
		"test://template/caf%65%CC%81/data", "a%3D%CC%B8", "%%321", "http://CAF%C3%89:080/h", "x:/\u212a%E2%84%AA\u037e",
		"FILE://LOCALHOST/A/../%C3%89#x", "http://h/a/%2E%2E/./b?c=d+e", "file:/\u0130"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, uri string) {
		n := resourceuri.Key(uri)
		if again := resourceuri.Key(n); again != n {
			t.Errorf("Key(%q) = %q, but Key(%q) = %q", uri, n, n, again)
		}
	})
}

// TestMatchWorkIsLinear (attack run C4: with 62 long pinned templates, one
// 20,000-character URI cost the bridge 20 s of CPU — a regular expression
// was built and run per template and call, its run quadratic in the runs
// of 'q' the URI and templates shared): Match and a Matcher compile no
// template per call (allocations, counted: the regexps took thousands),
// and read a URI of the bound through 62 such templates, matching or not,
// as Match did.
func TestMatchWorkIsLinear(t *testing.T) {
	q := strings.Repeat("q", 950)
	var set []string
	for i := range 62 {
		set = append(set, fmt.Sprintf("evil://a/{x}%s%03d%s{y}/z", q, i, q))
	}
	miss := "evil://a/" + strings.Repeat("q", resourceuri.MaxURIBytes-len("evil://a//z")) + "/z"
	hit := "evil://a/x" + q + "007" + q + "y/z"
	m := resourceuri.NewMatcher(set)
	for uri, want := range map[string]string{miss: "", hit: set[7]} {
		if got, ok := resourceuri.Match(set, uri); got != want || ok != (want != "") {
			t.Errorf("Match(%.40q…) = %q, %v; want %q", uri, got, ok, want)
		}
		if got, ok := m.Match(uri); got != want || ok != (want != "") {
			t.Errorf("Matcher.Match(%.40q…) = %q, %v; want %q", uri, got, ok, want)
		}
		if n := testing.AllocsPerRun(5, func() { resourceuri.Match(set, uri) }); n > 2 {
			t.Errorf("Match(62 templates, %.40q…) allocates %v times: templates compiled per call?", uri, n)
		}
		if n := testing.AllocsPerRun(5, func() { m.Match(uri) }); n > 2 {
			t.Errorf("Matcher.Match(%.40q…) allocates %v times", uri, n)
		}
	}
}
