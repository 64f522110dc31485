package upstream

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Guard is the operator's allow-list of where upstreams may be: which hosts
// an HTTP upstream may name (empty: any) and which executables a stdio
// upstream may start (empty: none). Link-local and cloud metadata
// addresses are refused unless AllowLinkLocal, at every dial — so a name
// that resolves there later, or a redirect to one, is refused too.
type Guard struct {
	Hosts          []string
	Commands       []string
	AllowLinkLocal bool
}

// metadata are cloud instance-metadata endpoints outside link-local ranges.
var metadata = []netip.Prefix{
	netip.MustParsePrefix("100.100.100.200/32"), // Alibaba Cloud
	netip.MustParsePrefix("fd00:ec2::254/128"),  // AWS IPv6
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

// CheckCommand reports whether argv may be started.
func (g Guard) CheckCommand(argv []string) error {
	if len(argv) == 0 || argv[0] == "" {
		return errors.New("empty command")
	}
	if !slices.Contains(g.Commands, argv[0]) && !slices.Contains(g.Commands, filepath.Base(argv[0])) {
		return fmt.Errorf("%s is not in --upstream-commands (stdio upstreams start only the executables listed there)", argv[0])
	}
	return nil
}

func (g Guard) checkAddr(ip netip.Addr) error {
	ip = ip.Unmap()
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

// maxIdleConnsPerUpstream is how many idle connections an upstream keeps.
const maxIdleConnsPerUpstream = 64

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
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	}
	return &http.Client{
		Transport: tr,
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
