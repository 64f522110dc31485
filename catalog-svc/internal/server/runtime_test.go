package server_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/url"
	"slices"
	"testing"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/platform/tenancy"

	"github.com/sharedos/toolshare/catalog-svc/internal/server"
)

// listing is a Runtime whose ListOperations returns a fresh copy of ops.
type listing struct {
	server.Runtime
	ops []*sharedosv1.OperationRecord
}

func (l listing) ListOperations(context.Context, *sharedosv1.ListOperationsRequest) (*sharedosv1.ListOperationsResponse, error) {
	out := &sharedosv1.ListOperationsResponse{}
	for _, op := range l.ops {
		out.Operations = append(out.Operations, &sharedosv1.OperationRecord{CallId: op.GetCallId(), Tenant: op.GetTenant()})
	}
	return out, nil
}

// peerAs is a context whose peer presented a verified certificate with id.
func peerAs(t *testing.T, id string) context.Context {
	u, err := url.Parse(id)
	if err != nil {
		t.Fatal(err)
	}
	cert := &x509.Certificate{URIs: []*url.URL{u}}
	info := credentials.TLSInfo{State: tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}, VerifiedChains: [][]*x509.Certificate{{cert}}}}
	return peer.NewContext(context.Background(), &peer.Peer{AuthInfo: info})
}

// TestListOperationsScopedByTenant: a host reads only the records of the
// tenants --host-tenants binds it to (another tenant's turn reads as one
// that does not exist); records with no tenant (a refused grant) and every
// tenant's are read by operators, hosts bound to * and plaintext callers.
func TestListOperationsScopedByTenant(t *testing.T) {
	p, err := tenancy.Parse([]string{"spiffe://sharedos.local/host/h1=acme", "spiffe://sharedos.local/host/all=*"})
	if err != nil {
		t.Fatal(err)
	}
	rt := listing{ops: []*sharedosv1.OperationRecord{{CallId: "a1", Tenant: "acme"}, {CallId: "x", Tenant: ""}, {CallId: "b1", Tenant: "beta"}, {CallId: "a2", Tenant: "acme"}}}
	srv := server.NewRuntimeServer(rt).ScopedBy(p)
	unscoped := server.NewRuntimeServer(rt)
	for _, c := range []struct {
		name string
		srv  *server.RuntimeServer
		ctx  context.Context
		want []string
	}{
		{"host of acme", srv, peerAs(t, "spiffe://sharedos.local/host/h1"), []string{"a1", "a2"}},
		{"host without an entry", srv, peerAs(t, "spiffe://sharedos.local/host/h2"), nil},
		{"host bound to *", srv, peerAs(t, "spiffe://sharedos.local/host/all"), []string{"a1", "x", "b1", "a2"}},
		{"operator", srv, peerAs(t, "spiffe://sharedos.local/operator/op"), []string{"a1", "x", "b1", "a2"}},
		{"plaintext", srv, context.Background(), []string{"a1", "x", "b1", "a2"}},
		{"host of a server bound to no tenants", unscoped, peerAs(t, "spiffe://sharedos.local/host/h1"), nil},
	} {
		resp, err := c.srv.ListOperations(c.ctx, &sharedosv1.ListOperationsRequest{TurnId: "t"})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var got []string
		for _, op := range resp.GetOperations() {
			got = append(got, op.GetCallId())
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: read %v, want %v", c.name, got, c.want)
		}
	}
}
