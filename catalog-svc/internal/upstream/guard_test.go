package upstream_test

import (
	"net/http"
	"testing"

	"github.com/sharedos/toolshare/catalog-svc/internal/upstream"
)

// A redirect keeps to its upstream's host and never leaves https: the
// upstream's headers (its credential) go along.
func TestRedirects(t *testing.T) {
	for _, tc := range []struct {
		from, to string
		ok       bool
	}{
		{"https://mcp.example.com/mcp", "https://mcp.example.com/v2/mcp", true},
		{"http://mcp.example.com/mcp", "https://mcp.example.com/mcp", true},
		{"http://mcp.example.com/mcp", "http://mcp.example.com/v2", true},
		{"https://mcp.example.com/mcp", "http://mcp.example.com/mcp", false},
		{"https://mcp.example.com/mcp", "https://other.example.com/mcp", false},
		{"https://mcp.example.com/mcp", "https://169.254.169.254/latest", false},
	} {
		from, _ := http.NewRequest(http.MethodPost, tc.from, nil)
		to, _ := http.NewRequest(http.MethodPost, tc.to, nil)
		err := upstream.CheckRedirect(upstream.Guard{}, to, []*http.Request{from})
		if (err == nil) != tc.ok {
			t.Errorf("%s → %s: %v, want allowed %v", tc.from, tc.to, err, tc.ok)
		}
	}
}

// A credential crosses plain http only to a loopback host, unless the
// operator allows it: elsewhere anyone on the path reads it.
func TestCredentialsOverPlainHTTP(t *testing.T) {
	for _, tc := range []struct {
		url string
		ok  bool
	}{
		{"https://mcp.example.com/mcp", true},
		{"http://127.0.0.1:8080/mcp", true},
		{"http://127.1.2.3/mcp", true},
		{"http://[::1]:8080/mcp", true},
		{"http://localhost:8080/mcp", false}, // a name, whatever it resolves to
		{"http://mcp.example.com/mcp", false},
		{"http://10.0.0.7:8080/mcp", false},
		{"http://[::ffff:10.0.0.7]/mcp", false},
		{"http://localhost.example.com/mcp", false},
	} {
		err := upstream.Guard{}.CheckCredentialURL(tc.url)
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v, want allowed %v", tc.url, err, tc.ok)
		}
		if err := (upstream.Guard{AllowCleartextCredentials: true}).CheckCredentialURL(tc.url); err != nil {
			t.Errorf("%s with cleartext credentials allowed: %v", tc.url, err)
		}
	}
}
