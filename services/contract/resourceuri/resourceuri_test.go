package resourceuri_test

import (
	"testing"

	"github.com/sharedos/toolshare/services/contract/resourceuri"
)

// TestMatch: a concrete URI reads the registration with exactly
// its URI, else a template whose {var} each stand for one segment.
func TestMatch(t *testing.T) {
	pinned := []string{"test://static-text", "test://template/{id}/data", "test://a/{x}.{y}"}
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
