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
