package resourceuri

import (
	"context"
	"errors"
)

// Overlap reports whether one URI may be read through both a and b, each
// a registered resource URI or RFC 6570 level-1 template, and names one
// such URI (witness; "" when the two were too intricate to compare, which
// is reported as an overlap: a registration that cannot be told apart from
// another is not let in beside it). Match sends a read to the registration
// with exactly its URI, else to the first template in byte order it
// matches, so two registrations that overlap would take each other's reads.
//
// It is sound as Match reads — every URI Match reads through both is an
// overlap — and errs only towards reporting one: templates are compared as
// regular languages, each {var} a non-empty run of the characters Match
// lets its value hold where it stands (no '/', '?' or '#'; in a special
// scheme's authority ASCII letters, digits, '.', '-' and '_'; in the query
// no '&' or ';'), leaving aside Match's checks on the value as a whole (no
// dot segment, no separator once decoded, an IPv4 host in dotted-decimal).
// A concrete URI is compared with a template by Match's own rule. The two
// are then compared again as a reader spells them (Key of each, the
// template's {var}s as before): "USERS://alice/{p}" overlaps
// "users://{id}/profile", since a reader takes "USERS://alice/profile"
// for "users://alice/profile". (That second comparison is a precaution,
// not a proof: a read through a template is refused anyway when another
// spelling of it is registered on its own.)
func Overlap(a, b string) (witness string, ok bool) {
	witness, ok, _ = OverlapWithin(context.Background(), a, b, &Work{})
	return witness, ok
}

// Work counts what Overlap comparisons do — one for each pair compared and
// one for each state their walks visit — and, made by WorkWithin, bounds
// it. The zero Work counts and bounds nothing but each walk's own states
// (maxOverlapStates).
type Work struct {
	limit   int
	bounded bool
	done    int
}

// WorkWithin is a Work of at most limit.
func WorkWithin(limit int) *Work { return &Work{limit: max(limit, 0), bounded: true} }

// Done is the work done so far.
func (w *Work) Done() int { return w.done }

func (w *Work) take() error {
	w.done++
	if w.bounded && w.done > w.limit {
		return ErrWorkSpent
	}
	return nil
}

// ErrWorkSpent: the comparisons did all their Work allows.
var ErrWorkSpent = errors.New("resourceuri: the overlap comparisons reached their bound")

// OverlapWithin is Overlap, its work counted in w: when it would do more
// than w allows it stops with ErrWorkSpent, and when ctx ends (checked
// every checkEvery states) with ctx's error — ok true with either, since
// a comparison not finished is no proof of no overlap.
func OverlapWithin(ctx context.Context, a, b string, w *Work) (witness string, ok bool, err error) {
	if err := w.take(); err != nil {
		return "", true, err
	}
	switch ta, tb := IsTemplate(a), IsTemplate(b); {
	case ta && tb:
		if witness, ok, err := intersect(ctx, patternOf(a), patternOf(b), w); ok || err != nil {
			return witness, true, err
		}
	case ta:
		if matches(a, b) {
			return b, true, nil
		}
	case tb:
		if matches(b, a) {
			return a, true, nil
		}
	default:
		if a == b {
			return a, true, nil
		}
	}
	return intersect(ctx, patternOf(Key(a)), patternOf(Key(b)), w)
}

// elem is one element of a template's pattern: a literal byte, or (set
// not nil) a {var}, one or more bytes of set.
type elem struct {
	lit byte
	set *byteSet
}

type byteSet [256]bool

// The sets a {var}'s value is drawn from, by where it stands (Match).
var pathSet, hostSet, querySet = func() (p, h, q byteSet) {
	for c := range 256 {
		b := byte(c)
		p[c] = b != '/' && b != '?' && b != '#' && (b >= 0x80 || b == '%' || mayStand(b))
		h[c] = b < 0x80 && hostChar(rune(b))
		q[c] = p[c] && b != '&' && b != ';'
	}
	return
}()

// patternOf is tmpl as a sequence of elements, each {var} holding what
// Match lets it hold where it stands.
func patternOf(tmpl string) []elem {
	var out []elem
	last := 0
	for _, loc := range Var.FindAllStringIndex(tmpl, -1) {
		for i := last; i < loc[0]; i++ {
			out = append(out, elem{lit: tmpl[i]})
		}
		set := &pathSet
		switch placeOf(tmpl[:loc[0]]) {
		case atHost:
			set = &hostSet
		case atQuery:
			set = &querySet
		}
		out = append(out, elem{set: set})
		last = loc[1]
	}
	for i := last; i < len(tmpl); i++ {
		out = append(out, elem{lit: tmpl[i]})
	}
	return out
}

// maxOverlapStates bounds the walk of intersect: two templates whose
// comparison would take more are reported as overlapping. Two templates
// as registrations write them take tens of states; two of 2,000 bytes
// whose {var}s may each take the other's long runs of one letter take the
// whole bound (attack run C3), about 50 ms.
const maxOverlapStates = 1 << 16

// checkEvery is how many states intersect walks between looks at its
// context.
const checkEvery = 1 << 10

// witnessChars are the characters a witness's values are written with
// first, for a witness an operator reads easily.
const witnessChars = "xyzabcdefghijklmnopqrstuvw0123456789XYZABCDEFGHIJKLMNOPQRSTUVW-_~."

// intersect reports whether some string is in both patterns' languages
// and returns one: a breadth-first walk of the product of their automata.
// A state is a position in each pattern, and for each whether the {var}
// there has taken a character already (and so may end). Each state
// visited is one of work's; a walk work does not allow, or whose ctx ended, is
// reported as an overlap, with the error.
func intersect(ctx context.Context, a, b []elem, work *Work) (string, bool, error) {
	if !literalEnds(a, b) {
		return "", false, nil
	}
	n, m := len(a), len(b)
	type state struct {
		i, j   int
		ia, jb bool
	}
	type step struct {
		from state
		c    int // the character taken; -1: none (a {var} ended)
	}
	start := state{}
	seen := map[state]step{start: {c: -1}}
	queue := []state{start}
	visit := func(s state, from state, c int) {
		if _, ok := seen[s]; !ok {
			seen[s] = step{from: from, c: c}
			queue = append(queue, s)
		}
	}
	for walked := 1; len(queue) > 0; walked++ {
		if len(seen) > maxOverlapStates {
			return "", true, nil
		}
		if err := work.take(); err != nil {
			return "", true, err
		}
		if walked%checkEvery == 0 {
			if err := ctx.Err(); err != nil {
				return "", true, err
			}
		}
		s := queue[0]
		queue = queue[1:]
		if s.i == n && s.j == m {
			var w []byte
			for x := s; x != start; x = seen[x].from {
				if c := seen[x].c; c >= 0 {
					w = append(w, byte(c))
				}
			}
			for l, r := 0, len(w)-1; l < r; l, r = l+1, r-1 {
				w[l], w[r] = w[r], w[l]
			}
			return string(w), true, nil
		}
		if s.ia {
			visit(state{s.i + 1, s.j, false, s.jb}, s, -1)
		}
		if s.jb {
			visit(state{s.i, s.j + 1, s.ia, false}, s, -1)
		}
		if s.i == n || s.j == m {
			continue
		}
		c := common(a[s.i], b[s.j])
		if c < 0 {
			continue
		}
		next := state{s.i + 1, s.j + 1, false, false}
		if a[s.i].set != nil {
			next.i, next.ia = s.i, true
		}
		if b[s.j].set != nil {
			next.j, next.jb = s.j, true
		}
		visit(next, s, c)
	}
	return "", false, nil
}

// common is a character both elements take; -1 when there is none.
func common(x, y elem) int {
	switch {
	case x.set == nil && y.set == nil:
		if x.lit == y.lit {
			return int(x.lit)
		}
	case x.set == nil:
		if y.set[x.lit] {
			return int(x.lit)
		}
	case y.set == nil:
		if x.set[y.lit] {
			return int(y.lit)
		}
	default:
		for i := range len(witnessChars) {
			if c := witnessChars[i]; x.set[c] && y.set[c] {
				return int(c)
			}
		}
		for c := range 256 {
			if x.set[c] && y.set[c] {
				return c
			}
		}
	}
	return -1
}

// literalEnds reports whether the literal bytes before the first {var}
// of each pattern agree as far as both go, and so those after the last:
// the quick answer for most pairs (another scheme, another suffix).
func literalEnds(a, b []elem) bool {
	for i := 0; i < len(a) && i < len(b) && a[i].set == nil && b[i].set == nil; i++ {
		if a[i].lit != b[i].lit {
			return false
		}
	}
	for i, j := len(a)-1, len(b)-1; i >= 0 && j >= 0 && a[i].set == nil && b[j].set == nil; i, j = i-1, j-1 {
		if a[i].lit != b[j].lit {
			return false
		}
	}
	return true
}
