package resourceuri_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/sharedos/toolshare/services/contract/resourceuri"
)

// TestOverlap: two registrations overlap when one URI reads through both
// (Match), or would in a spelling a reader takes for it (Key); the
// witness is such a URI.
func TestOverlap(t *testing.T) {
	for _, c := range []struct {
		a, b    string
		witness string // "" when any
	}{
		// The reproduction: e5's template, and what e4 added later.
		{"users://{id}/profile", "users://alice/{p}", "users://alice/profile"},
		{"users://{id}/profile", "users://bob/profile", "users://bob/profile"},
		{"users://{id}/profile", "{s}://{h}/{p}", ""},
		{"{s}://{h}/{p}", "notes://shared/readme", "notes://shared/readme"},
		{"{s}://{h}/{p}", "future://victim/data", "future://victim/data"},
		// A value holds dots; two values may stand in one segment.
		{"test://a/{x}.{y}", "test://a/{z}", ""},
		{"test://a/{x}.{y}", "test://a/b.c.d", "test://a/b.c.d"},
		{"http://{host}/x", "http://internal/{p}", "http://internal/x"},
		{"test://q/api?id={id}", "test://q/api?id=7", "test://q/api?id=7"},
		{"test://q/{p}?id={id}", "test://q/api?{q}", ""},
		// Another spelling of the same URI, to a reader.
		{"USERS://alice/{p}", "users://{id}/profile", ""},
		{"users://bob/profile", "users://BOB/profile", ""},
		{"users://{id}/profile", "users://bob/%70rofile", ""},
		{"file:///srv/A/{x}", "file:///srv/a/{y}", ""},
		{"test://x/{p}", "test://x/{p}", "test://x/x"},
	} {
		for _, pair := range [][2]string{{c.a, c.b}, {c.b, c.a}} {
			w, ok := resourceuri.Overlap(pair[0], pair[1])
			if !ok || c.witness != "" && w != c.witness {
				t.Errorf("Overlap(%q, %q) = %q, %v; want an overlap (%q)", pair[0], pair[1], w, ok, c.witness)
			}
		}
	}
	for _, c := range [][2]string{
		{"users://{id}/profile", "users://{id}/settings"},
		{"github://{owner}/{repo}", "gitlab://{owner}/{repo}"},
		{"test://x/{p}", "test://x/{p}/y"},
		{"test://x/{p}", "test://x/a/b"},
		{"test://x/{p}", "test://x/.."},
		{"test://x/{p}", "test://x/"},
		{"test://template/{id}/data", "test://static-text"},
		{"users://{id}/profile", "users://alice/settings"},
		{"test://q/api?id={id}", "test://q/api?id=7&x=1"},
		{"http://{host}/x", "http://internal:8080/{p}"},
		{"users://bob/profile", "users://carol/profile"},
	} {
		for _, pair := range [][2]string{{c[0], c[1]}, {c[1], c[0]}} {
			if w, ok := resourceuri.Overlap(pair[0], pair[1]); ok {
				t.Errorf("Overlap(%q, %q) = %q: want none", pair[0], pair[1], w)
			}
		}
	}
}

// TestOverlapWitnessReadsThroughBoth: the witness of two templates that
// overlap as Match reads them reads through each.
func TestOverlapWitnessReadsThroughBoth(t *testing.T) {
	for _, c := range [][2]string{
		{"users://{id}/profile", "users://alice/{p}"},
		{"users://{id}/profile", "{s}://{h}/{p}"},
		{"test://a/{x}.{y}", "test://a/{z}"},
		{"http://{host}/{x}", "{s}://localhost/{p}"},
		{"test://q/{p}?id={id}", "test://q/api?{q}"},
	} {
		w, ok := resourceuri.Overlap(c[0], c[1])
		if !ok {
			t.Errorf("Overlap(%q, %q): none", c[0], c[1])
			continue
		}
		for _, tmpl := range c {
			if got, _ := resourceuri.Match([]string{tmpl}, w); got != tmpl {
				t.Errorf("Overlap(%q, %q)'s witness %q does not read through %q", c[0], c[1], w, tmpl)
			}
		}
	}
}

// TestOverlapIsSound, property-style: of two random templates (or URIs),
// whenever a URI made from either — its {var}s given random values —
// reads through both (Match), Overlap reports them overlapping.
func TestOverlapIsSound(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	schemes := []string{"s", "http", "{sch}"}
	pieces := []string{"a", "b", ".", "/", "a.", "b/", "{v}", "{v}", "{v}", "?q=", "&", "-", "x"}
	values := []string{"a", "b", "a.b", "x", "..", ".", "a%2Fb", "A", "ab", "1", "127.0.0.1", "b/", "a&b", "q=", "-", "%7E"}
	template := func() string {
		var b strings.Builder
		b.WriteString(schemes[r.IntN(len(schemes))] + "://")
		for i := range 1 + r.IntN(4) {
			p := pieces[r.IntN(len(pieces))]
			b.WriteString(strings.ReplaceAll(p, "{v}", fmt.Sprintf("{v%d}", i)))
		}
		return b.String()
	}
	expand := func(tmpl string) string {
		return resourceuri.Var.ReplaceAllStringFunc(tmpl, func(string) string { return values[r.IntN(len(values))] })
	}
	both := 0
	for range 6000 {
		a, b := template(), template()
		if r.IntN(4) == 0 {
			b = expand(b) // a concrete URI
		}
		var read string
		for range 16 {
			from, other := a, b
			if r.IntN(2) == 0 {
				from, other = b, a
			}
			u := expand(from)
			if _, ok := resourceuri.Match([]string{other}, u); !ok {
				continue
			}
			if _, ok := resourceuri.Match([]string{from}, u); ok {
				read = u
				break
			}
		}
		if read == "" {
			continue
		}
		both++
		if _, ok := resourceuri.Overlap(a, b); !ok {
			t.Errorf("%q reads through %q and %q, but Overlap says they do not overlap", read, a, b)
		}
		if _, ok := resourceuri.Overlap(b, a); !ok {
			t.Errorf("%q reads through %q and %q, but Overlap(b, a) says they do not overlap", read, b, a)
		}
	}
	t.Logf("%d pairs with a URI reading through both", both)
	if both < 200 {
		t.Fatalf("only %d pairs with a URI reading through both: the generator tests little", both)
	}
}

// Templates too intricate to compare within the bound are reported as
// overlapping, at once.
func TestOverlapBounded(t *testing.T) {
	a := "s://" + strings.Repeat("{a}x", 400)
	b := "s://" + strings.Repeat("x{b}", 400)
	if _, ok := resourceuri.Overlap(a, b); !ok {
		t.Errorf("want an overlap (or the bound)")
	}
}

// attackTemplate is one of the templates of attack run C3: two {var}s
// around 1,900 bytes of one letter, each pair of them taking a walk its
// whole bound, which an upstream listed by the dozen.
func attackTemplate(i int) string {
	q := strings.Repeat("q", 950)
	return fmt.Sprintf("evil://a/{x}%s%03d%s{y}/z", q, i, q)
}

// TestOverlapWorkIsBounded (attack run C3: each pair of an upstream's 60
// templates took about 115 ms, twice, with no way to stop): a comparison's
// work is counted — a pair, and each state its walks visit — and stops,
// reported as an overlap, at the walk's own bound, at the Work's, or when
// its context ends.
func TestOverlapWorkIsBounded(t *testing.T) {
	a, b := attackTemplate(1), attackTemplate(2)
	w := &resourceuri.Work{}
	if _, ok, err := resourceuri.OverlapWithin(t.Context(), a, b, w); !ok || err != nil {
		t.Fatalf("two intricate templates: %v, %v; want reported overlapping", ok, err)
	}
	if w.Done() > 1<<16+2 {
		t.Errorf("one walk took %d states; the bound is %d", w.Done(), 1<<16)
	}
	within := resourceuri.WorkWithin(1000)
	if _, ok, err := resourceuri.OverlapWithin(t.Context(), a, b, within); !ok || !errors.Is(err, resourceuri.ErrWorkSpent) || within.Done() != 1001 {
		t.Errorf("within 1,000: %v, %v after %d; want an overlap, ErrWorkSpent after 1,001", ok, err, within.Done())
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	w = &resourceuri.Work{}
	if _, ok, err := resourceuri.OverlapWithin(ctx, a, b, w); !ok || !errors.Is(err, context.Canceled) || w.Done() > 1025 {
		t.Errorf("cancelled: %v, %v after %d states; want an overlap, context.Canceled within 1,024", ok, err, w.Done())
	}
	// What registrations write takes a few dozen.
	w = &resourceuri.Work{}
	if _, ok, err := resourceuri.OverlapWithin(t.Context(), "users://{id}/profile", "users://{id}/settings", w); ok || err != nil || w.Done() > 64 {
		t.Errorf("users://{id}/profile, users://{id}/settings: %v, %v after %d", ok, err, w.Done())
	}
}
