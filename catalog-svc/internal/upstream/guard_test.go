package upstream_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"

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

// An upstream's response headers, and its token endpoint's, are read to
// 64 KiB at most: Go's default read each to 10 MiB, and an upstream that
// answered each of SharedOS's answer POSTs with 9 MiB of headers took
// catalog-svc from 174 MB to 3.3 GB (attack run a1).
func TestResponseHeadersAreBounded(t *testing.T) {
	large := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("X-Large", strings.Repeat("a", 1<<20))
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"access_token":"tok","token_type":"Bearer","expires_in":3600}`))
	}))
	t.Cleanup(large.Close)
	resp, err := upstream.HTTPClient(upstream.Guard{}).Get(large.URL)
	if err == nil {
		resp.Body.Close()
		t.Fatal("1 MiB of headers read")
	}
	if !strings.Contains(err.Error(), "headers exceeded 65536 bytes") {
		t.Fatalf("%v: want the headers' bound named", err)
	}

	h := newHarness(t, upstream.Guard{})
	t.Setenv("UPSTREAM_TEST_CLIENT_SECRET", "s3cret")
	rec, err := h.m.Add(t.Context(), &sharedosv1.UpstreamProvider{Namespace: "fx", Url: h.url, AutoApproveNew: true,
		Oauth: &sharedosv1.OAuthClientCredentials{TokenUrl: large.URL + "/token", ClientId: "sharedos",
			ClientSecretRef: "env:UPSTREAM_TEST_CLIENT_SECRET"}}, "tester")
	if err != nil {
		t.Fatal(err)
	}
	if got := rec.GetStatus().GetError(); !strings.Contains(got, "headers exceeded 65536 bytes") {
		t.Fatalf("a token endpoint answering 1 MiB of headers: status %q, want the headers' bound named", got)
	}
}

// The connections to an upstream's host are bounded: past the bound a
// request waits for one (here its deadline runs out first) rather than
// dial another.
func TestConnectionsToAnUpstreamAreBounded(t *testing.T) {
	t.Cleanup(upstream.SetMaxConnsPerUpstream(2))
	held, release := make(chan struct{}, 2), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			held <- struct{}{}
			<-release
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // before Close, which waits for the requests held
	hc := upstream.HTTPClient(upstream.Guard{})
	for range 2 {
		go func() {
			if resp, err := hc.Get(srv.URL + "/hold"); err == nil {
				resp.Body.Close()
			}
		}()
		<-held
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second) // the assertion's bound: a loopback request takes milliseconds
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/quick", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err == nil {
		resp.Body.Close()
		t.Fatal("a third connection to the upstream was dialled while two were held")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%v: want the request to wait for a connection until its deadline", err)
	}
}
