package mcpserver

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"

	"golang.org/x/time/rate"
)

// Defaults of the refused-request budget per source address.
const (
	DefaultFailureRate  = 20 // refusals per second, refilled
	DefaultFailureBurst = 40
	// maxFailureSources bounds the limiter table; past it the table starts
	// over (an attacker cycling addresses gains a fresh burst, no more).
	maxFailureSources = 10_000
)

// failures is the budget of refused requests (no or a wrong token, an
// unknown or closed turn) per source address, and of wrong tokens per turn.
// Once a source has spent its budget, its requests are refused without a
// lease lookup — 429 when the turn's status is not in this pod's cache —
// and once a source or a turn has, a wrong token is 401 without the second
// lookup that tells another turn's token from none: a flood of made-up
// tokens costs no database query (issue 17, item 12). Requests with the
// right token on a cached turn are never limited, nor are those with the
// right token of a turn this pod let in before (Handler.holders): the
// budget bounds lookups for turn ids that may not exist, and a caller of a
// live turn must not be refused because another client at its address
// spent it.
type failures struct {
	limit rate.Limit
	burst int

	mu  sync.Mutex
	src map[string]*rate.Limiter
}

func newFailures(perSecond float64, burst int) *failures {
	if perSecond <= 0 {
		perSecond = DefaultFailureRate
	}
	if burst <= 0 {
		burst = DefaultFailureBurst
	}
	return &failures{limit: rate.Limit(perSecond), burst: burst, src: map[string]*rate.Limiter{}}
}

// turnKey is the budget key of a turn (source keys are addresses).
func turnKey(turnID string) string { return "turn " + turnID }

// source is the address a request came from: the peer, or — when the peer
// is a trusted proxy — the nearest address in X-Forwarded-For that is not
// one (each proxy appends the address it received from). Behind an Ingress
// every request's peer is the Ingress; without trusting it, one client's
// refusals would spend everyone's budget.
func source(r *http.Request, trusted []netip.Prefix) string {
	host := r.RemoteAddr
	if h, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		host = h
	}
	if !isTrusted(host, trusted) {
		return host
	}
	var hops []string
	for _, v := range r.Header.Values("X-Forwarded-For") {
		hops = append(hops, strings.Split(v, ",")...)
	}
	for i := len(hops) - 1; i >= 0; i-- {
		hop := strings.TrimSpace(hops[i])
		if _, err := netip.ParseAddr(hop); err != nil {
			return host // a malformed chain: the proxy is the source
		}
		if !isTrusted(hop, trusted) {
			return hop
		}
	}
	return host
}

func isTrusted(addr string, trusted []netip.Prefix) bool {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return false
	}
	a = a.Unmap()
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// budgetKey is the budget src spends: an IPv6 client's whole /64, the
// least a host is given (it can pick any of 2^64 addresses in it, each a
// fresh budget, and flood the table until it starts over for everyone);
// an IPv4 address, or a turn's key, as it is.
func budgetKey(src string) string {
	a, err := netip.ParseAddr(src)
	if err != nil || !a.Is6() || a.Is4In6() {
		return src
	}
	return netip.PrefixFrom(a.WithZone(""), 64).Masked().String()
}

func (f *failures) limiter(src string) *rate.Limiter {
	src = budgetKey(src)
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok := f.src[src]
	if !ok {
		if len(f.src) >= maxFailureSources {
			clear(f.src)
		}
		l = rate.NewLimiter(f.limit, f.burst)
		f.src[src] = l
	}
	return l
}

// exhausted reports whether src has no refusal left to spend.
func (f *failures) exhausted(src string) bool { return f.limiter(src).Tokens() < 1 }

// spend takes one refusal from src's budget.
func (f *failures) spend(src string) { f.limiter(src).Allow() }
