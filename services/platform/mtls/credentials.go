package mtls

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/credentials/tls/certprovider"
	"google.golang.org/grpc/credentials/tls/certprovider/pemfile"
	"google.golang.org/grpc/peer"

	"github.com/sharedos/toolshare/services/contract/callers"
)

// Identity is a peer's SPIFFE ID and what it says.
type Identity struct {
	ID   spiffeid.ID
	Role callers.Role
	Name string
}

func (i Identity) String() string { return i.ID.String() }

// ParseIdentity reads an identity from a certificate: exactly one URI SAN,
// a SPIFFE ID whose path is /<role>/<name> with a known role.
func ParseIdentity(cert *x509.Certificate) (Identity, error) {
	id, err := x509svid.IDFromCert(cert)
	if err != nil {
		return Identity{}, err
	}
	segs := strings.Split(strings.TrimPrefix(id.Path(), "/"), "/")
	if len(segs) != 2 || segs[0] == "" || segs[1] == "" {
		return Identity{}, fmt.Errorf("%s: the path must be /<role>/<name>", id)
	}
	role := callers.Role(segs[0])
	if !callers.Known(role) {
		return Identity{}, fmt.Errorf("%s: unknown role %q (known: %v)", id, role, callers.Roles)
	}
	return Identity{ID: id, Role: role, Name: segs[1]}, nil
}

// Credentials are one process's transport security: its identity and trust
// bundle (re-read from the files), or plaintext.
type Credentials struct {
	plaintext bool
	provider  certprovider.Provider
	self      Identity
	keyFile   string
}

// KeyFile is the path of the private key (--tls-key); "" in plaintext.
func (c *Credentials) KeyFile() string {
	if c == nil {
		return ""
	}
	return c.keyFile
}

// Plaintext is the credential of --insecure-plaintext (and of in-process
// unit tests): no TLS, no identities.
func Plaintext() *Credentials { return &Credentials{plaintext: true} }

// Load checks cfg and starts watching its files. Mutual TLS is the default:
// without the three files and without InsecurePlaintext it is an error that
// names what is missing.
func Load(ctx context.Context, cfg Config) (*Credentials, error) {
	files := map[string]string{"--tls-ca": cfg.CA, "--tls-cert": cfg.Cert, "--tls-key": cfg.Key}
	var missing, set []string
	for _, f := range []string{"--tls-ca", "--tls-cert", "--tls-key"} {
		if files[f] == "" {
			missing = append(missing, f)
		} else {
			set = append(set, f)
		}
	}
	if cfg.InsecurePlaintext {
		if len(set) > 0 {
			return nil, fmt.Errorf("tls: --insecure-plaintext with %s: choose one", strings.Join(set, ", "))
		}
		return Plaintext(), nil
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("tls: %s required: the internal plane runs mutual TLS "+
			"(--insecure-plaintext runs without it, on loopback only)", strings.Join(missing, ", "))
	}
	refresh := cfg.Refresh
	if refresh <= 0 {
		refresh = DefaultRefresh
	}
	p, err := pemfile.NewProvider(pemfile.Options{CertFile: cfg.Cert, KeyFile: cfg.Key, RootFile: cfg.CA, RefreshDuration: refresh})
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	c := &Credentials{provider: p, keyFile: cfg.Key}
	km, err := c.material(ctx)
	if err != nil {
		p.Close()
		return nil, fmt.Errorf("tls: read %s, %s, %s: %w", cfg.CA, cfg.Cert, cfg.Key, err)
	}
	leaf, err := x509.ParseCertificate(km.Certs[0].Certificate[0])
	if err != nil {
		p.Close()
		return nil, fmt.Errorf("tls: %s: %w", cfg.Cert, err)
	}
	if c.self, err = ParseIdentity(leaf); err != nil {
		p.Close()
		return nil, fmt.Errorf("tls: %s: %w", cfg.Cert, err)
	}
	return c, nil
}

// material is the current key material. The provider answers from memory
// once it has read the files; the timeout only bounds the first read.
func (c *Credentials) material(ctx context.Context) (*certprovider.KeyMaterial, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	km, err := c.provider.KeyMaterial(ctx)
	if err != nil {
		return nil, err
	}
	if len(km.Certs) == 0 || km.Roots == nil {
		return nil, errors.New("no certificate or trust bundle")
	}
	return km, nil
}

// Plaintext reports whether c runs without TLS.
func (c *Credentials) Plaintext() bool { return c == nil || c.plaintext }

// Self is this process's identity (zero in plaintext).
func (c *Credentials) Self() Identity {
	if c.Plaintext() {
		return Identity{}
	}
	return c.self
}

// Close stops watching the files.
func (c *Credentials) Close() {
	if !c.Plaintext() {
		c.provider.Close()
	}
}

// CheckListener refuses a plaintext listener that is not on loopback.
func (c *Credentials) CheckListener(addr string) error {
	if !c.Plaintext() {
		return nil
	}
	loopback, err := IsLoopback(addr)
	if err != nil {
		return fmt.Errorf("tls: listener %q: %w", addr, err)
	}
	if loopback {
		return nil
	}
	return fmt.Errorf("tls: --insecure-plaintext refuses to listen on %q: plaintext is for loopback only", addr)
}

// IsLoopback reports whether a listen address (host:port) is on loopback:
// localhost or a loopback IP. An empty host (every interface) is not.
func IsLoopback(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, err
	}
	return IsLoopbackHost(host), nil
}

// IsLoopbackHost reports whether host (a name or an IP, no port) is on
// loopback: localhost or a loopback IP.
func IsLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// loopbackOnly is plaintext that dials loopback only (--insecure-plaintext
// is for loopback, as CheckListener holds listeners to): a connection whose
// peer is another address is closed before anything is sent on it. The
// connected address is checked, so a name that resolves elsewhere is
// refused too.
type loopbackOnly struct {
	credentials.TransportCredentials
}

func (l loopbackOnly) ClientHandshake(ctx context.Context, authority string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	// The target (authority) as well as the peer: through a proxy on
	// loopback (HTTPS_PROXY), the peer is the proxy and the target is not.
	host := authority
	if h, _, err := net.SplitHostPort(authority); err == nil {
		host = h
	}
	to := IsLoopbackHost(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
	if a, ok := conn.RemoteAddr().(*net.TCPAddr); !to || !ok || !a.IP.IsLoopback() {
		_ = conn.Close()
		return nil, nil, fmt.Errorf("tls: --insecure-plaintext refuses to call %s (via %s): plaintext is for loopback only", authority, conn.RemoteAddr())
	}
	return l.TransportCredentials.ClientHandshake(ctx, authority, conn)
}

func (l loopbackOnly) Clone() credentials.TransportCredentials {
	return loopbackOnly{l.TransportCredentials.Clone()}
}

// ServerOptions are the gRPC server options of c: TLS 1.3 that requires a
// client certificate signed by the current trust bundle and carrying a
// SPIFFE identity of this trust domain. Nothing in plaintext.
func (c *Credentials) ServerOptions() []grpc.ServerOption {
	if c.Plaintext() {
		return nil
	}
	base := &tls.Config{
		MinVersion: tls.VersionTLS13,
		// Each handshake takes the material current at that moment, so a
		// rotated certificate or bundle applies to new connections while
		// established ones (and their in-flight calls) go on.
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			km, err := c.material(context.Background())
			if err != nil {
				return nil, err
			}
			return &tls.Config{
				MinVersion:       tls.VersionTLS13,
				Certificates:     km.Certs,
				ClientCAs:        km.Roots,
				ClientAuth:       tls.RequireAndVerifyClientCert,
				NextProtos:       []string{"h2"},
				VerifyConnection: func(cs tls.ConnectionState) error { _, err := c.peerIdentity(cs, nil); return err },
			}, nil
		},
	}
	return []grpc.ServerOption{grpc.Creds(credentials.NewTLS(base))}
}

// DialOption is the transport credential of a client of c that expects the
// server to hold one of the roles expect (any role when none is given).
func (c *Credentials) DialOption(expect ...callers.Role) grpc.DialOption {
	if c.Plaintext() {
		return grpc.WithTransportCredentials(loopbackOnly{insecure.NewCredentials()})
	}
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS13,
		// The server is verified in VerifyConnection against the trust
		// bundle current at the handshake (it rotates, so it cannot be a
		// fixed RootCAs) and by its SPIFFE ID instead of a DNS name: the
		// standard library's chain verification, not a hand-written one.
		InsecureSkipVerify: true, //nolint:gosec // verified in VerifyConnection
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			km, err := c.material(context.Background())
			if err != nil {
				return nil, err
			}
			return &km.Certs[0], nil
		},
		VerifyConnection: func(cs tls.ConnectionState) error {
			km, err := c.material(context.Background())
			if err != nil {
				return err
			}
			if len(cs.PeerCertificates) == 0 {
				return errors.New("tls: the server sent no certificate")
			}
			inter := x509.NewCertPool()
			for _, ic := range cs.PeerCertificates[1:] {
				inter.AddCert(ic)
			}
			if _, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{
				Roots: km.Roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			}); err != nil {
				return fmt.Errorf("tls: server certificate: %w", err)
			}
			_, err = c.peerIdentity(cs, expect)
			return err
		},
	}
	return grpc.WithTransportCredentials(credentials.NewTLS(cfg))
}

// peerIdentity checks the verified peer's SPIFFE ID: this trust domain, a
// known role, and one of expect when given.
func (c *Credentials) peerIdentity(cs tls.ConnectionState, expect []callers.Role) (Identity, error) {
	if len(cs.PeerCertificates) == 0 {
		return Identity{}, errors.New("tls: no peer certificate")
	}
	id, err := ParseIdentity(cs.PeerCertificates[0])
	if err != nil {
		return Identity{}, fmt.Errorf("tls: peer identity: %w", err)
	}
	if id.ID.TrustDomain() != c.self.ID.TrustDomain() {
		return Identity{}, fmt.Errorf("tls: peer %s is not of trust domain %s", id, c.self.ID.TrustDomain())
	}
	if len(expect) > 0 && !slices.Contains(expect, id.Role) {
		return Identity{}, fmt.Errorf("tls: peer %s has role %s, want %v", id, id.Role, expect)
	}
	return id, nil
}

// PeerIdentity is the identity of the caller of a gRPC server handler (false
// when it came without a verified certificate, i.e. in plaintext).
func PeerIdentity(ctx context.Context) (Identity, bool) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return Identity{}, false
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.VerifiedChains) == 0 || len(info.State.PeerCertificates) == 0 {
		return Identity{}, false
	}
	id, err := ParseIdentity(info.State.PeerCertificates[0])
	if err != nil {
		return Identity{}, false
	}
	return id, true
}

// Caller is PeerIdentity's SPIFFE ID for a log line ("" when none).
func Caller(ctx context.Context) string {
	if id, ok := PeerIdentity(ctx); ok {
		return id.String()
	}
	return ""
}
