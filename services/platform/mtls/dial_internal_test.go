package mtls

import (
	"context"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc/credentials/insecure"
)

// addrConn is a connection whose peer is addr.
type addrConn struct {
	net.Conn
	addr net.Addr
}

func (c addrConn) RemoteAddr() net.Addr { return c.addr }

// --insecure-plaintext dials loopback only, as it listens (found by review:
// `--insecure-plaintext --authz 192.0.2.1:7402` called authz-svc in the
// clear): the connected peer is checked, whatever name was dialled.
func TestPlaintextDialsLoopbackOnly(t *testing.T) {
	creds := loopbackOnly{insecure.NewCredentials()}
	for addr, ok := range map[net.Addr]bool{
		&net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 7402}: true,
		&net.TCPAddr{IP: net.ParseIP("::1"), Port: 7402}:       true,
		&net.TCPAddr{IP: net.ParseIP("192.0.2.1"), Port: 7402}: false,
		&net.TCPAddr{IP: net.ParseIP("10.0.0.7"), Port: 7402}:  false,
		&net.UnixAddr{Name: "/tmp/x.sock", Net: "unix"}:        false,
	} {
		a, b := net.Pipe()
		_, _, err := creds.ClientHandshake(context.Background(), "127.0.0.1:7402", addrConn{Conn: a, addr: addr})
		if (err == nil) != ok || (!ok && !strings.Contains(err.Error(), "loopback only")) {
			t.Errorf("plaintext to %s: %v, want allowed %v", addr, err, ok)
		}
		_ = a.Close()
		_ = b.Close()
	}
}

// Through a proxy on loopback (HTTPS_PROXY) the peer is loopback and the
// target is not: refused (found by review). Loopback targets by name or
// address pass.
func TestPlaintextTargetLoopbackOnly(t *testing.T) {
	creds := loopbackOnly{insecure.NewCredentials()}
	proxy := &net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 3128}
	for authority, ok := range map[string]bool{"127.0.0.1:7402": true, "localhost:7402": true, "[::1]:7402": true, "localhost": true,
		"192.0.2.1:7402": false, "catalog.example.com:7401": false, "[2001:db8::1]:7401": false} {
		a, b := net.Pipe()
		_, _, err := creds.ClientHandshake(context.Background(), authority, addrConn{Conn: a, addr: proxy})
		if (err == nil) != ok {
			t.Errorf("plaintext to %s through a loopback peer: %v, want allowed %v", authority, err, ok)
		}
		_ = a.Close()
		_ = b.Close()
	}
}
