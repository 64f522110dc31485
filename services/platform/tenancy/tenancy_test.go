package tenancy_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/url"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/sharedos/toolshare/services/platform/tenancy"
)

// as is a context whose peer presented a verified certificate with id.
func as(id string) context.Context {
	u, err := url.Parse(id)
	if err != nil {
		panic(err)
	}
	cert := &x509.Certificate{URIs: []*url.URL{u}}
	info := credentials.TLSInfo{State: tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}, VerifiedChains: [][]*x509.Certificate{{cert}}}}
	return peer.NewContext(context.Background(), &peer.Peer{AuthInfo: info})
}

func TestParse(t *testing.T) {
	p, err := tenancy.Parse([]string{"spiffe://sharedos.local/host/h1=acme", " spiffe://sharedos.local/host/h1=beta", "spiffe://sharedos.local/host/all=*"})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(p["spiffe://sharedos.local/host/h1"], ","); got != "acme,beta" {
		t.Errorf("h1's tenants = %s", got)
	}
	for _, bad := range []string{"spiffe://sharedos.local/host/h1", "spiffe://sharedos.local/host/h1=", "not a spiffe id=acme", "spiffe://sharedos.local/operator/op=acme"} {
		if _, err := tenancy.Parse([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestCheckAndAnyTenant(t *testing.T) {
	p, err := tenancy.Parse([]string{"spiffe://sharedos.local/host/h1=acme", "spiffe://sharedos.local/host/all=*"})
	if err != nil {
		t.Fatal(err)
	}
	h1, all, h2, op := as("spiffe://sharedos.local/host/h1"), as("spiffe://sharedos.local/host/all"), as("spiffe://sharedos.local/host/h2"), as("spiffe://sharedos.local/operator/op")
	for _, c := range []struct {
		name   string
		ctx    context.Context
		tenant string
		want   string // "" = allowed
	}{
		{"h1, its tenant", h1, "acme", ""},
		{"h1, another tenant", h1, "evil", `may not open turns for tenant "evil"`},
		{"h1, no tenant", h1, "", "context.tenant is required"},
		{"a host without an entry", h2, "acme", "no tenants are configured"},
		{"a host bound to *", all, "anything", ""},
		{"an operator", op, "anything", ""},
		{"plaintext", context.Background(), "anything", ""},
	} {
		err := p.Check(c.ctx, c.tenant)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want PermissionDenied (%s)", c.name, err, c.want)
		}
	}
	for ctx, want := range map[context.Context]bool{h1: false, h2: false, all: true, op: true, context.Background(): true} {
		if got := p.AnyTenant(ctx); got != want {
			t.Errorf("AnyTenant = %v, want %v", got, want)
		}
	}
}
