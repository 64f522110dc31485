package upstream

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pmezard/go-difflib/difflib"
)

// patch applies the unified diff d to a, as patch would: what the diff
// says the pending text is. ok is false when d does not apply to a.
func patch(a, d string) (string, bool) {
	al := difflib.SplitLines(a)
	if d == "" {
		return strings.Join(al, ""), true
	}
	var out []string
	at := 0
	for _, l := range strings.SplitAfter(d, "\n")[2:] {
		switch {
		case l == "":
		case strings.HasPrefix(l, "@@ -"):
			from, _, _ := strings.Cut(strings.Fields(l)[1][1:], ",")
			start, err := strconv.Atoi(from)
			if err != nil {
				return "", false
			}
			if !strings.Contains(strings.Fields(l)[1], ",0") {
				start-- // a range of lines begins at its first; an empty one after it
			}
			if start < at || start > len(al) {
				return "", false
			}
			out, at = append(out, al[at:start]...), start
		case l[0] == ' ' || l[0] == '-':
			if at >= len(al) || al[at] != l[1:] {
				return "", false
			}
			if l[0] == ' ' {
				out = append(out, l[1:])
			}
			at++
		case l[0] == '+':
			out = append(out, l[1:])
		default:
			return "", false
		}
	}
	return strings.Join(append(out, al[at:]...), ""), true
}

// pending is b as a diff's lines make it (difflib.SplitLines: the last
// ends with a line break).
func pending(b string) string { return strings.Join(difflib.SplitLines(b), "") }

// A diff applied to the published text is the pending one, however the
// lines were matched — by difflib, by lines found once in each side, or
// past maxDiffCells replaced whole.
func FuzzDiffText(f *testing.F) {
	for _, s := range [][2]string{{"", "a\nb\n"}, {"a\nb\nc\n", "a\nc\n"}, {"x\ny\nz\n", "z\ny\nx\n"},
		{"{\n  \"a\": 1\n}\n", "{\n  \"a\": 2,\n  \"b\": 1\n}\n"}, {"a\na\na\nb\n", "b\na\na\na\n"}, {"no newline", "no newline at all"}} {
		f.Add(s[0], s[1], 0)
		f.Add(s[0], s[1], 3)
	}
	f.Fuzz(func(t *testing.T, a, b string, cells int) {
		defer func(v int) { maxDiffCells = v }(maxDiffCells)
		maxDiffCells = cells & 0xff
		d := diffText(a, b, 1<<30, "")
		if got, ok := patch(a, d); !ok || got != pending(b) {
			t.Fatalf("the diff of %q and %q does not make the one of the other:\n%s", a, b, d)
		}
	})
}

// lines are n lines of the form "k<i>": 1, from first on, every step-th
// of them replaced by another.
func lines(n, step int) string {
	var b strings.Builder
	for i := range n {
		k := i
		if step > 0 && i%step == 1 {
			k += 10 * n
		}
		fmt.Fprintf(&b, "  \"k%d\": 1,\n", k)
	}
	return b.String()
}

// A diff's work is bounded: 40,000 lines every other one changed took a
// minute of difflib, and a refresh diffs each changed definition holding
// the records lock. Past maxDiffCells the parts are replaced whole — the
// diff still right (FuzzDiffText).
func TestADiffsWorkIsBounded(t *testing.T) {
	a, b := lines(40000, 0), lines(40000, 2)
	start := time.Now()
	d := diffText(a, b, 1<<30, "")
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the diff took %s", took)
	}
	if got, ok := patch(a, d); !ok || got != pending(b) {
		t.Error("the diff does not make the pending text")
	}
}

// Two changes far apart in a large definition — a description and the
// end of an output schema, or a value deep in each of two schemas — are
// each their own small hunk: the lines found once in each side between
// them anchor the rest, which is never shown changed whole.
func TestFarApartChangesAreSmallHunks(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var a strings.Builder
	for i := range 30000 {
		fmt.Fprintf(&a, "  \"p%d\": %d,\n", i, r.IntN(3)) // unique lines
		a.WriteString("  0,\n")                           // and many alike
	}
	b := strings.Replace(strings.Replace(a.String(), `"p10": `, `"q10": `, 1), `"p29990": `, `"q29990": `, 1)
	d := diffText(a.String(), b, 1<<30, "")
	if got, ok := patch(a.String(), d); !ok || got != pending(b) {
		t.Fatal("the diff does not make the pending text")
	}
	if n := strings.Count(d, "\n-"); n != 2 || len(d) > 2048 {
		t.Errorf("the diff removes %d lines in %d bytes, want the 2 changed:\n%.2000s", n, len(d), d)
	}
}

// A diff past its bound keeps its first whole lines and says how long it
// was, then what shows the rest, within the bound.
func TestACutDiffSaysSo(t *testing.T) {
	a, b := lines(2000, 0), lines(2000, 3)
	whole := diffText(a, b, 1<<30, "")
	d := diffText(a, b, 4096, diffMore("fx.echo"))
	if len(d) > 4096 || !strings.HasPrefix(whole, d[:strings.LastIndex(d[:len(d)-1], "\n")+1]) {
		t.Fatalf("cut diff of %d bytes is not the whole one's beginning", len(d))
	}
	last := d[strings.LastIndex(d[:len(d)-1], "\n")+1:]
	if want := fmt.Sprintf("…[cut: %d bytes in all; sharedosctl tools diff fx.echo shows the whole diff of the definition pending now]\n", len(whole)); last != want {
		t.Errorf("last line %q, want %q", last, want)
	}
	if d := diffText(a, b, len(whole), ""); d != whole {
		t.Error("a diff within its bound is cut")
	}
}
