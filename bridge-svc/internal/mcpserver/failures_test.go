package mcpserver

import (
	"net/http/httptest"
	"net/netip"
	"testing"
)

// TestSourceBehindTrustedProxies: the refusal budget is kept per client,
// not per Ingress: a trusted peer's X-Forwarded-For names the source (the
// nearest untrusted hop); an untrusted peer's header is ignored.
func TestSourceBehindTrustedProxies(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	for _, c := range []struct {
		name, peer string
		xff        []string
		want       string
	}{
		{"no proxy", "192.0.2.7:5555", nil, "192.0.2.7"},
		{"untrusted peer's header is ignored", "192.0.2.7:5555", []string{"198.51.100.1"}, "192.0.2.7"},
		{"trusted peer", "10.1.2.3:80", []string{"198.51.100.1"}, "198.51.100.1"},
		{"chain of proxies", "10.1.2.3:80", []string{"203.0.113.9, 198.51.100.1, 10.9.9.9"}, "198.51.100.1"},
		{"two header lines", "10.1.2.3:80", []string{"203.0.113.9", "198.51.100.1"}, "198.51.100.1"},
		{"forged hop before a real one", "10.1.2.3:80", []string{"10.0.0.1, 198.51.100.1"}, "198.51.100.1"},
		{"malformed chain", "10.1.2.3:80", []string{"not-an-address"}, "10.1.2.3"},
		{"trusted peer without header", "10.1.2.3:80", nil, "10.1.2.3"},
		{"IPv6 loopback proxy", "[::1]:80", []string{"2001:db8::1"}, "2001:db8::1"},
	} {
		r := httptest.NewRequest("POST", "http://localhost/turns/x/mcp", nil)
		r.RemoteAddr = c.peer
		for _, v := range c.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		if got := source(r, trusted); got != c.want {
			t.Errorf("%s: source = %q, want %q", c.name, got, c.want)
		}
	}
}
