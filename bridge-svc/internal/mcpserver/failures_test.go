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

// TestIPv6ClientsSpendTheirSlash64: every address of one IPv6 /64 spends
// one budget (a client picks any of them); another /64, an IPv4 address
// and an IPv4-mapped one each keep their own.
func TestIPv6ClientsSpendTheirSlash64(t *testing.T) {
	f := newFailures(1, 2)
	f.spend("2001:db8:1:2::1")
	f.spend("2001:db8:1:2:ffff:ffff:ffff:fffe")
	if !f.exhausted("2001:db8:1:2:abcd::9") {
		t.Error("a third address of the same /64 has a budget of its own")
	}
	for _, other := range []string{"2001:db8:1:3::1", "192.0.2.7", "::ffff:192.0.2.8", "fe80::1%eth0"} {
		if f.exhausted(other) {
			t.Errorf("%s shares the spent /64's budget", other)
		}
	}
}
