package mcpserver

import (
	"net"
	"net/http"
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
// unknown or closed turn) per source address. Once a source has spent it,
// its requests are refused without a lease lookup — 429 when the turn's
// status is not in this pod's cache, and a wrong token is 401 without the
// second lookup that tells another turn's token from none — so a flood of
// made-up tokens costs no database query (issue 17, item 12). Requests
// with the right token on a cached turn are never limited.
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

func source(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}

func (f *failures) limiter(src string) *rate.Limiter {
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
