package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/sharedos/toolshare/services/platform/grpcx"
	"github.com/sharedos/toolshare/services/platform/secretref"

	"github.com/sharedos/toolshare/catalog-svc/internal/budget"
)

// Guard is the operator's allow-list of where upstreams may be: which hosts
// an HTTP upstream may name (empty: any) and which executables a stdio
// upstream may start (empty: none). Link-local and cloud metadata
// addresses are refused unless AllowLinkLocal, at every dial — so a name
// that resolves there later, or a redirect to one, is refused too. A
// credential goes over plain http:// only to a loopback address unless
// AllowCleartextCredentials. With DenyPrivate, loopback and private
// addresses are refused at every dial as well: for a kernel whose
// upstreams are all public, no upstream URL reaches what is beside it. An
// upstream's secret references (headers, bearer token, OAuth client
// secret) resolve only within Credentials: never to the kernel's own
// configuration (its database URL, its keys). A stdio upstream's process
// may open nothing under Private (on Linux, with Landlock): the kernel's
// key directories, its record journal, its secret references' directories.
type Guard struct {
	Hosts                     []string
	Commands                  []string
	AllowLinkLocal            bool
	AllowCleartextCredentials bool
	DenyPrivate               bool
	Credentials               secretref.Scope
	Private                   []string
}

// sharedAddressSpace is carrier-grade NAT's (RFC 6598): private in all
// but name (netip's IsPrivate leaves it out).
var sharedAddressSpace = netip.MustParsePrefix("100.64.0.0/10")

// metadata are cloud instance-metadata endpoints (and the services beside
// them that hand out credentials) outside link-local ranges. The IPv6 ones
// are unique-local: without these, only --upstream-deny-private refuses
// them.
var metadata = []netip.Prefix{
	netip.MustParsePrefix("100.100.100.200/32"),     // Alibaba Cloud
	netip.MustParsePrefix("168.63.129.16/32"),       // Azure WireServer
	netip.MustParsePrefix("192.0.0.192/32"),         // Oracle Cloud Classic
	netip.MustParsePrefix("fd00:ec2::/32"),          // AWS IPv6 services: metadata (::254), EKS Pod Identity (::23)
	netip.MustParsePrefix("fd20:ce::254/128"),       // Google Cloud IPv6
	netip.MustParsePrefix("fd00:c1::a9fe:a9fe/128"), // Oracle Cloud IPv6
	netip.MustParsePrefix("fd00:42::42/128"),        // Scaleway IPv6
}

// CheckURL reports whether raw may be an upstream's URL.
func (g Guard) CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("not a URL: %v", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("scheme %q: want http or https", u.Scheme)
	}
	if u.Host == "" || u.User != nil {
		return errors.New("want http(s)://host[:port]/path without user information")
	}
	if len(g.Hosts) > 0 && !slices.Contains(g.Hosts, u.Hostname()) && !slices.Contains(g.Hosts, u.Host) {
		return fmt.Errorf("host %s is not in --upstream-allow-hosts", u.Host)
	}
	if ip, err := netip.ParseAddr(u.Hostname()); err == nil {
		return g.checkAddr(ip)
	}
	return nil
}

// CheckCredentialURL reports whether a credential (an upstream's headers,
// its bearer token, an OAuth client secret) may be sent to raw: over
// http:// only to a loopback address, where nobody else is on the path.
// CheckURL reports what else is wrong with raw.
func (g Guard) CheckCredentialURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "http" || g.AllowCleartextCredentials {
		return nil
	}
	// A loopback address, not a name: a name is only what a resolver says.
	if ip, err := netip.ParseAddr(u.Hostname()); err == nil && ip.Unmap().IsLoopback() {
		return nil
	}
	return fmt.Errorf("%s would carry a credential over plain http, which anyone on the path reads: use https (plain http carries one only to a loopback address, unless --upstream-allow-cleartext-credentials)", u.Host)
}

// CheckCommand reports whether argv may be started.
func (g Guard) CheckCommand(argv []string) error {
	if len(argv) == 0 || argv[0] == "" {
		return errors.New("empty command")
	}
	if slices.Contains(g.Commands, argv[0]) {
		return nil
	}
	// A listed name also allows the path it is found at on the PATH — not
	// the same name in another directory.
	if name := filepath.Base(argv[0]); filepath.IsAbs(argv[0]) && slices.Contains(g.Commands, name) {
		if found, err := exec.LookPath(name); err == nil && found == argv[0] {
			return nil
		}
	}
	return fmt.Errorf("%s is not in --upstream-commands (stdio upstreams start only the executables listed there, by name as found on the PATH or by path)", argv[0])
}

func (g Guard) checkAddr(ip netip.Addr) error {
	// A zone (fe80::1%eth0) says which link, not which address; and a zoned
	// address is in no prefix: drop it first.
	ip = ip.Unmap().WithZone("")
	if g.AllowLinkLocal && !g.DenyPrivate {
		return nil
	}
	for _, v4 := range embeddedIPv4(ip) {
		if err := g.checkAddr(v4); err != nil {
			return fmt.Errorf("address %s carries %s: %w", ip, v4, err)
		}
	}
	// 0.0.0.0 and :: are dialled as this host (refused as unspecified
	// too, but not when link-local is allowed).
	if g.DenyPrivate && (ip.IsLoopback() || ip.IsPrivate() || ip.IsUnspecified() || sharedAddressSpace.Contains(ip)) {
		return fmt.Errorf("address %s is loopback or private: refused by --upstream-deny-private", ip)
	}
	if g.AllowLinkLocal {
		return nil
	}
	if ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsUnspecified() {
		return fmt.Errorf("address %s is link-local or unspecified (instance metadata lives there): refused unless --upstream-allow-link-local", ip)
	}
	for _, p := range metadata {
		if p.Contains(ip) {
			return fmt.Errorf("address %s is a cloud metadata endpoint: refused unless --upstream-allow-link-local", ip)
		}
	}
	return nil
}

// IPv6 prefixes that carry an IPv4 address a translator or tunnel reaches
// (a NAT64 gateway dials 64:ff9b::a9fe:a9fe as 169.254.169.254).
var (
	nat64WellKnown = netip.MustParsePrefix("64:ff9b::/96")   // RFC 6052
	nat64Local     = netip.MustParsePrefix("64:ff9b:1::/48") // RFC 8215
	sixToFour      = netip.MustParsePrefix("2002::/16")      // RFC 3056
	teredo         = netip.MustParsePrefix("2001::/32")      // RFC 4380
	v4Compatible   = netip.MustParsePrefix("::/96")          // RFC 4291, deprecated
)

// embeddedIPv4 are the IPv4 addresses an IPv6 address stands for through
// NAT64, 6to4, Teredo or the IPv4-compatible form: each is checked as if
// dialled itself.
func embeddedIPv4(ip netip.Addr) []netip.Addr {
	if !ip.Is6() {
		return nil
	}
	b := ip.As16()
	v4 := func(a, b2, c, d byte) netip.Addr { return netip.AddrFrom4([4]byte{a, b2, c, d}) }
	switch {
	case nat64WellKnown.Contains(ip):
		return []netip.Addr{v4(b[12], b[13], b[14], b[15])}
	case nat64Local.Contains(ip):
		// A network's prefix within the local-use /48 may be a /48, /56,
		// /64 or /96 (RFC 6052 2.2: the address skips the u octet, byte
		// 8): every reading.
		return []netip.Addr{v4(b[6], b[7], b[9], b[10]), v4(b[7], b[9], b[10], b[11]),
			v4(b[9], b[10], b[11], b[12]), v4(b[12], b[13], b[14], b[15])}
	case sixToFour.Contains(ip):
		return []netip.Addr{v4(b[2], b[3], b[4], b[5])}
	case teredo.Contains(ip):
		// The server, and the client obfuscated (each bit inverted).
		return []netip.Addr{v4(b[4], b[5], b[6], b[7]), v4(^b[12], ^b[13], ^b[14], ^b[15])}
	case v4Compatible.Contains(ip) && ip != netip.IPv6Unspecified() && ip != netip.IPv6Loopback():
		return []netip.Addr{v4(b[12], b[13], b[14], b[15])}
	}
	return nil
}

// maxResponseBytes bounds one HTTP response of an upstream (a JSON body,
// or the event stream of one request): what it answers travels on to the
// kernel in one gRPC message of at most this size anyway.
var maxResponseBytes int64 = grpcx.MaxMessageSize

// limitTransport bounds every response body it returns at max bytes.
type limitTransport struct {
	next http.RoundTripper
	max  int64
}

func (t limitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err == nil && resp.Body != nil {
		resp.Body = &limitedBody{ReadCloser: resp.Body, max: t.max, left: t.max,
			ctx: req.Context(), lease: budget.LeaseOf(req.Context()), length: resp.ContentLength}
	}
	return resp, err
}

// CloseIdleConnections reaches the transport beneath.
func (t limitTransport) CloseIdleConnections() { closeIdle(t.next) }

// closeIdle closes rt's idle connections when it keeps any: a wrapping
// transport passes http.Client.CloseIdleConnections on with it.
func closeIdle(rt http.RoundTripper) {
	if c, ok := rt.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

type limitedBody struct {
	io.ReadCloser
	max, left int64

	// lease, when the request is a call's (budget.LeaseOf), is charged
	// for the bytes before they are read: credit bytes taken and not yet
	// read, length the declared Content-Length (-1: none).
	ctx    context.Context
	lease  *budget.Lease
	credit int64
	length int64
	taken  bool
}

// budgetChunk is what a response of no declared length takes of the
// result budget at a time.
const budgetChunk = 64 << 10

// reserve makes room in the lease for a read of up to want bytes and
// returns how many may be read: the whole declared length at the first
// read (a lease holding nothing may wait for it), then budgetChunk at a
// time.
func (b *limitedBody) reserve(want int64) (int64, error) {
	if b.credit == 0 {
		read := b.max - b.left
		if b.length >= 0 && read >= b.length {
			return want, nil // all that was declared is read: what follows is the end
		}
		n := int64(budgetChunk)
		if !b.taken && b.length > 0 && b.length <= b.max {
			n = b.length
		}
		if err := b.lease.Take(b.ctx, n); err != nil {
			return 0, err
		}
		b.taken, b.credit = true, n
	}
	return min(want, b.credit), nil
}

func (b *limitedBody) tooLarge() error {
	return fmt.Errorf("upstream response larger than %d bytes", b.max)
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, b.tooLarge()
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1] // one byte past the bound tells a body that ends there from a longer one
	}
	if b.lease != nil && len(p) > 0 {
		room, err := b.reserve(int64(len(p)))
		if err != nil {
			return 0, err
		}
		p = p[:room]
	}
	n, err := b.ReadCloser.Read(p)
	if b.credit -= int64(n); b.credit < 0 {
		b.credit = 0 // past the declared length: no more than net/http lets through
	}
	if b.left -= int64(n); b.left < 0 {
		return n + int(b.left), b.tooLarge()
	}
	return n, err
}

// maxIdleConnsPerUpstream is how many idle connections an upstream keeps.
const maxIdleConnsPerUpstream = 64

// maxConnsPerUpstream bounds the connections to an upstream's host (and
// to its token endpoint's) at once, whatever holds them: room for every
// call that may be parked (maxParked) and as many running beside them,
// and the answers to the upstream's own requests (maxReplies). A request
// past it waits for a connection within its own deadline. A variable for
// tests.
var maxConnsPerUpstream = 2*maxParked + maxReplies

// maxResponseHeaderBytes bounds the headers of one upstream response: Go's
// default let each hold 10 MiB, and an upstream that answered each of
// SharedOS's answer POSTs with 9 MiB of headers took catalog-svc from
// 174 MB to 3.3 GB (attack run a1).
const maxResponseHeaderBytes = 64 << 10

// httpClient dials only addresses the guard allows and re-checks every
// redirect's URL.
func (g Guard) httpClient() *http.Client {
	d := &net.Dialer{
		Timeout: 10 * time.Second,
		Control: func(_, address string, _ syscall.RawConn) error {
			host, _, err := net.SplitHostPort(address)
			if err != nil {
				return err
			}
			ip, err := netip.ParseAddr(host)
			if err != nil {
				return err
			}
			return g.checkAddr(ip)
		},
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil // an upstream is dialled directly: the guard sees the real address
	// Concurrent calls to one upstream keep their connections: with the
	// default (2 idle per host) every call past the second dialled anew.
	tr.MaxIdleConnsPerHost = maxIdleConnsPerUpstream
	tr.MaxConnsPerHost = maxConnsPerUpstream
	tr.MaxResponseHeaderBytes = maxResponseHeaderBytes
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	}
	return &http.Client{
		Transport: limitTransport{next: tr, max: maxResponseBytes},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 5 {
				return errors.New("too many redirects")
			}
			if err := g.CheckURL(req.URL.String()); err != nil {
				return fmt.Errorf("redirect refused: %w", err)
			}
			// The headers go along on the same host: never in the clear
			// after a connection that was not.
			if via[0].URL.Scheme == "https" && req.URL.Scheme != "https" {
				return fmt.Errorf("redirect from https to %s refused", req.URL.Scheme)
			}
			// The upstream's headers carry its credential: a redirect to
			// another host would hand them on.
			if !strings.EqualFold(req.URL.Host, via[0].URL.Host) {
				return fmt.Errorf("redirect to another host (%s) refused", req.URL.Host)
			}
			return nil
		},
	}
}
