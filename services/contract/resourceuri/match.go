package resourceuri

import (
	"strings"
	"sync"
	"unicode/utf8"
)

// MaxURIBytes bounds a resource URI: a registration's URI or template (the
// catalogue refuses a longer one: uri, max_length), and the URI a
// resources/read names — the bridge refuses a longer one -32602 and the
// kernel failed/invalid_request, each recorded, before any template is
// matched against it.
const MaxURIBytes = 2048

// Match returns the registration a concrete URI reads: the one registered
// with exactly that URI, else the first (in byte order) template it
// matches, each {var} standing for one non-empty segment without '/', '?'
// or '#' that is no dot-segment and holds no separator or NUL once
// percent-decoded ("..", "%2e%2e", "a%2Fb", "a%5cb"), and no character
// that may not stand in a URI (a space, a tab: readers drop some); in the
// authority of an http, https, ws, wss, ftp or file URI, ASCII letters,
// digits, '.', '-' and '_' only, an IPv4 address only dotted-decimal
// ("127.1" is 127.0.0.1 to a WHATWG parser); in the query, no '&' or ';'
// (another parameter): a provider that decodes or normalises the URI
// would read outside the template. ok is false when none does (or uri has
// a brace: a template is not a resource).
//
// Of several {var}s in one segment, each earlier one takes as much as it
// can ("test://a/{x}.{y}" reads "b.c.d" as x "b.c", y "d"), as a
// leftmost-first regular expression would. A template is compiled once
// (kept in a bounded memo; NewMatcher keeps a set's), and a URI is read
// through one in time linear in their lengths: a {var} holds no
// separator, so a URI's separators stand for the template's one for one,
// and within a segment each literal is found by one search from the right.
func Match(registered []string, uri string) (string, bool) {
	if strings.ContainsAny(uri, "{}") {
		return "", false
	}
	for _, r := range registered {
		if r == uri {
			return uri, true
		}
	}
	in := subjectOf(uri)
	best, found := "", false
	for _, r := range registered {
		if found && r >= best {
			continue
		}
		if c := memoized(r); c.template && c.matches(&in) {
			best, found = r, true
		}
	}
	return best, found
}

// MatchAll returns every template of registered that the concrete uri
// matches (as Match reads a template), in the order given; none when uri
// has a brace. A provider need not pick the first in byte order: mcp-go
// tries its templates in map order, so a read through one template may be
// served by any other that matches too.
func MatchAll(registered []string, uri string) []string {
	if strings.ContainsAny(uri, "{}") {
		return nil
	}
	in := subjectOf(uri)
	var out []string
	for _, r := range registered {
		if c := memoized(r); c.template && c.matches(&in) {
			out = append(out, r)
		}
	}
	return out
}

// Matcher is Match over one set of registrations, each template compiled
// once: what a turn's pinned resources are matched by for every read.
type Matcher struct {
	concrete  map[string]bool
	templates []*compiled // in byte order
}

// NewMatcher compiles registered for Match.
func NewMatcher(registered []string) *Matcher {
	m := &Matcher{concrete: map[string]bool{}}
	for _, r := range registered {
		if c := compile(r); c.template {
			m.templates = append(m.templates, c)
		} else {
			m.concrete[r] = true
		}
	}
	sortCompiled(m.templates)
	return m
}

// Match is Match(registered, uri) of the set m was made from (a nil m:
// of none).
func (m *Matcher) Match(uri string) (string, bool) {
	if m == nil || strings.ContainsAny(uri, "{}") {
		return "", false
	}
	if m.concrete[uri] {
		return uri, true
	}
	in := subjectOf(uri)
	for _, c := range m.templates {
		if c.matches(&in) {
			return c.raw, true
		}
	}
	return "", false
}

// Has reports whether s is one of the registrations m was made from, as
// written (a template by its text, not by what it matches).
func (m *Matcher) Has(s string) bool {
	if m == nil {
		return false
	}
	if m.concrete[s] {
		return true
	}
	for _, c := range m.templates {
		if c.raw == s {
			return true
		}
	}
	return false
}

func sortCompiled(cs []*compiled) {
	for i := 1; i < len(cs); i++ { // few, and mostly in order
		for j := i; j > 0 && cs[j].raw < cs[j-1].raw; j-- {
			cs[j], cs[j-1] = cs[j-1], cs[j]
		}
	}
}

// matches reports whether uri reads through the template tmpl (a URI
// without a {var}: whether it is uri).
func matches(tmpl, uri string) bool {
	in := subjectOf(uri)
	return memoized(tmpl).matches(&in)
}

// compiled is a template as Match reads URIs through it: its literal text
// cut at the separators no {var} holds ('/', '?', '#') into pieces, each
// the literals around the {var}s it holds.
type compiled struct {
	raw      string
	template bool // it has a {var}
	// utf8 is false when a literal is not UTF-8, which no URI reads
	// through (as a regular expression of it does not compile).
	utf8           bool
	prefix, suffix string // before the first {var}, after the last
	minLen         int    // the literals' bytes and a byte per {var}
	seps           string // the separators, in order
	pieces         []piece
	places         []place // of each {var}, in order
}

type piece struct {
	lits  []string // len(lits)-1 {var}s, between them
	first int      // the index in places of its first {var}
}

func compile(tmpl string) *compiled {
	c := &compiled{raw: tmpl, utf8: true}
	cur := piece{lits: []string{""}}
	literal := func(s string) {
		if !utf8.ValidString(s) {
			c.utf8 = false
		}
		c.minLen += len(s)
		for s != "" {
			i := strings.IndexAny(s, "/?#")
			if i < 0 {
				cur.lits[len(cur.lits)-1] += s
				return
			}
			cur.lits[len(cur.lits)-1] += s[:i]
			c.seps += s[i : i+1]
			c.pieces = append(c.pieces, cur)
			cur = piece{lits: []string{""}, first: len(c.places)}
			s = s[i+1:]
		}
	}
	last := 0
	for _, loc := range Var.FindAllStringIndex(tmpl, -1) {
		if !c.template {
			c.prefix = tmpl[:loc[0]]
		}
		c.template = true
		literal(tmpl[last:loc[0]])
		cur.lits = append(cur.lits, "")
		c.places = append(c.places, placeOf(tmpl[:loc[0]]))
		c.minLen++
		last = loc[1]
	}
	literal(tmpl[last:])
	c.pieces = append(c.pieces, cur)
	c.suffix = tmpl[last:]
	return c
}

// subject is a URI as templates are matched against it: its text with
// every byte that is not UTF-8 read as U+FFFD (as a regular expression
// reads it), and its separators.
type subject struct {
	uri string
	s   string
	// at maps an offset in s to one in uri; nil when s is uri.
	at []int
	// cuts are the offsets of the separators in s.
	cuts []int
}

func subjectOf(uri string) subject {
	in := subject{uri: uri, s: uri}
	if !utf8.ValidString(uri) {
		var b strings.Builder
		in.at = make([]int, 0, len(uri)+1)
		for i := 0; i < len(uri); {
			r, n := utf8.DecodeRuneInString(uri[i:])
			w := n
			if r == utf8.RuneError && n == 1 {
				b.WriteRune(utf8.RuneError)
				w = utf8.RuneLen(utf8.RuneError)
			} else {
				b.WriteString(uri[i : i+n])
			}
			for range w {
				in.at = append(in.at, i)
			}
			i += n
		}
		in.at = append(in.at, len(uri))
		in.s = b.String()
	}
	if n := countSeparators(in.s); n > 0 {
		in.cuts = make([]int, 0, n)
		for i := 0; i < len(in.s); i++ {
			if isSeparator(in.s[i]) {
				in.cuts = append(in.cuts, i)
			}
		}
	}
	return in
}

func isSeparator(c byte) bool { return c == '/' || c == '?' || c == '#' }

func countSeparators(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		if isSeparator(s[i]) {
			n++
		}
	}
	return n
}

// value is in.s[i:j] as the URI holds it.
func (in *subject) value(i, j int) string {
	if in.at == nil {
		return in.uri[i:j]
	}
	return in.uri[in.at[i]:in.at[j]]
}

// matches reports whether in reads through c: its separators are c's,
// and each segment between them matches c's piece there, every {var}'s
// value then checked where it stands (Match).
func (c *compiled) matches(in *subject) bool {
	s := in.s
	if !c.utf8 || len(s) < c.minLen || len(in.cuts) != len(c.seps) || !strings.HasPrefix(s, c.prefix) || !strings.HasSuffix(s, c.suffix) {
		return false
	}
	for k, i := range in.cuts {
		if s[i] != c.seps[k] {
			return false
		}
	}
	start := 0
	for k, p := range c.pieces {
		end := len(s)
		if k < len(in.cuts) {
			end = in.cuts[k]
		}
		if !c.matchPiece(in, p, start, end) {
			return false
		}
		start = end + 1
	}
	return true
}

// matchPiece reports whether in.s[start:end] matches p: its first and last
// literals at its ends, and each literal between as far right as the
// {var}s after it (one character each at least) let it stand — which
// gives each earlier {var} the most it can take.
func (c *compiled) matchPiece(in *subject, p piece, start, end int) bool {
	seg := in.s[start:end]
	lits := p.lits
	n := len(lits) - 1 // {var}s
	if n == 0 {
		return seg == lits[0]
	}
	if len(seg) < len(lits[0])+len(lits[n]) || !strings.HasPrefix(seg, lits[0]) || !strings.HasSuffix(seg, lits[n]) {
		return false
	}
	lo := start + len(lits[0]) // where the first {var} begins
	hi := end - len(lits[n])   // where the last one ends
	for j := n - 1; ; j-- {
		// The {var} j+1 (from 1) ends at hi; it takes one character at least.
		if hi <= lo {
			return false
		}
		if j == 0 {
			return c.value(in, p.first, lo, hi)
		}
		_, w := utf8.DecodeLastRuneInString(in.s[lo:hi])
		i := strings.LastIndex(in.s[lo:hi-w], lits[j])
		if i < 0 {
			return false
		}
		if !c.value(in, p.first+j, lo+i+len(lits[j]), hi) {
			return false
		}
		hi = lo + i
	}
}

// value checks the value in.s[i:j] of the {var} v (its index in places)
// as Match does where it stands.
func (c *compiled) value(in *subject, v, i, j int) bool {
	val := in.value(i, j)
	if !segment(val) {
		return false
	}
	switch c.places[v] {
	case atHost:
		return strings.IndexFunc(val, func(r rune) bool { return !hostChar(r) }) < 0 && dottedDecimal(hostOf(in.uri))
	case atQuery:
		return !strings.ContainsAny(val, "&;")
	}
	return true
}

// The memo of compiled templates Match keeps: at most maxMemoized, of at
// most MaxURIBytes each (a longer one is compiled at each call, in time
// linear in its length); full, it starts over.
const maxMemoized = 1024

var memo = struct {
	sync.RWMutex
	m map[string]*compiled
}{m: map[string]*compiled{}}

func memoized(tmpl string) *compiled {
	memo.RLock()
	c, ok := memo.m[tmpl]
	memo.RUnlock()
	if ok {
		return c
	}
	c = compile(tmpl)
	if len(tmpl) <= MaxURIBytes {
		memo.Lock()
		if len(memo.m) >= maxMemoized {
			clear(memo.m)
		}
		memo.m[tmpl] = c
		memo.Unlock()
	}
	return c
}
