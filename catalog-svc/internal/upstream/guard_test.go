package upstream_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
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

// With DenyPrivate, loopback and private addresses are refused — as a
// literal, as an IPv6 form that carries one, and at the dial of a name
// that resolves to one — and public ones still allowed.
func TestDenyPrivate(t *testing.T) {
	deny := upstream.Guard{DenyPrivate: true}
	for _, u := range []string{"http://127.0.0.1:8080/mcp", "http://[::1]/", "http://10.1.2.3/", "http://172.16.0.1/",
		"http://192.168.1.1/", "http://100.64.0.1/", "http://[fd12::1]/", "http://[::ffff:10.0.0.7]/",
		"http://[64:ff9b::a00:1]/", "http://[2002:a00:1::1]/"} {
		if err := deny.CheckURL(u); err == nil {
			t.Errorf("%s allowed with DenyPrivate", u)
		}
		if err := (upstream.Guard{}).CheckURL(u); err != nil {
			t.Errorf("%s refused without DenyPrivate: %v", u, err)
		}
	}
	for _, u := range []string{"https://mcp.example.com/mcp", "http://8.8.8.8/", "http://[2001:db8::1]/"} {
		if err := deny.CheckURL(u); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
	// Link-local stays refused when allowed with DenyPrivate, private stays refused.
	both := upstream.Guard{DenyPrivate: true, AllowLinkLocal: true}
	if err := both.CheckURL("http://169.254.169.254/"); err != nil {
		t.Errorf("link-local refused with AllowLinkLocal: %v", err)
	}
	for _, u := range []string{"http://10.0.0.1/", "http://0.0.0.0:8080/", "http://[::]:8080/"} { // the last two dial this host
		if err := both.CheckURL(u); err == nil {
			t.Errorf("%s allowed with AllowLinkLocal and DenyPrivate", u)
		}
	}

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer srv.Close()
	byName := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)
	resp, err := upstream.HTTPClient(deny).Get(byName)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("%s reached with DenyPrivate", byName)
	}
	if !strings.Contains(err.Error(), "--upstream-deny-private") {
		t.Fatalf("dial error %v: want the refusal named", err)
	}
	resp, err = upstream.HTTPClient(upstream.Guard{}).Get(byName)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}
