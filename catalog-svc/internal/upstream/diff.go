package upstream

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/pmezard/go-difflib/difflib"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
)

// diff is the unified diff of the published projections of from and to,
// each its canonical JSON indented one member per line; from nil diffs
// against nothing (a new tool). It is cut to most bytes (diffText).
func (m *Manager) diff(from, to *sharedosv1.ToolRegistration, most int, more string) (string, error) {
	a, err := m.pretty(from)
	if err != nil {
		return "", err
	}
	b, err := m.pretty(to)
	if err != nil {
		return "", err
	}
	return diffText(a, b, most, more), nil
}

// What a diff may hold: a quarantine event keeps maxEventDiffBytes of it
// in the provider's record (record.go), where its definitions could make
// it 33 times their size (a definition of 480 KB made a diff of 16 MB),
// and tools diff — which diffs the definitions again — answers with at
// most maxDiffBytes of it, beside the tool's definitions, in one message.
// Each is cut at a line's end and says so (diffText).
const (
	maxEventDiffBytes = 64 << 10
	maxDiffBytes      = 32 << 20
)

// diffMore is what a cut event's diff of name says shows the rest.
func diffMore(name string) string {
	return "sharedosctl tools diff " + clip(name, maxSkippedName) + " shows the whole diff of the definition pending now"
}

// diffContext is how many unchanged lines a hunk shows around a change.
const diffContext = 3

// maxDiffCells bounds the work of one diff. difflib compares each line of
// one side with the lines of the other where they differ, which can take
// the product of the two: an upstream's definition of 40,000 lines, every
// other one changed, took a minute — and a refresh diffs each definition
// that changed holding the records lock. So the lines both sides begin and
// end with are set apart first, then the lines found once in each side
// (patience diff) split the rest, in time about linear in the lines; the
// parts left between them go to difflib while the product of their sides
// adds up to at most this, and past it each is shown as one change — its
// lines on one side removed, on the other added: a diff that is right,
// only not the shortest.
var maxDiffCells = 1 << 18

// diffText is the unified diff from a (published) to b (pending), "" when
// they are the same. Past most bytes its lines are left out and it ends
// with a line saying how long it was, then more (what shows the rest).
func diffText(a, b string, most int, more string) string {
	al, bl := difflib.SplitLines(a), difflib.SplitLines(b)
	groups := grouped(opcodes(al, bl), diffContext)
	if len(groups) == 0 {
		return ""
	}
	w := cutWriter{most: most, room: len(more) + 64} // room for the last line
	w.line("", "--- published\n")
	w.line("", "+++ pending\n")
	for _, g := range groups {
		first, last := g[0], g[len(g)-1]
		w.line("", fmt.Sprintf("@@ -%s +%s @@\n", lineRange(first.I1, last.I2), lineRange(first.J1, last.J2)))
		for _, c := range g {
			if c.Tag == 'e' {
				w.lines(" ", al[c.I1:c.I2])
				continue
			}
			w.lines("-", al[c.I1:c.I2])
			w.lines("+", bl[c.J1:c.J2])
		}
	}
	if w.n <= most {
		return w.b.String()
	}
	note := fmt.Sprintf("…[cut: %d bytes in all", w.n)
	if more != "" {
		note += "; " + more
	}
	return w.b.String()[:w.fit] + note + "]\n"
}

// opcodes turn a into b (maxDiffCells).
func opcodes(a, b []string) []difflib.OpCode {
	d := differ{a: a, b: b, budget: maxDiffCells}
	d.between(0, len(a), 0, len(b), true)
	return d.codes
}

// differ makes the opcodes of a diff, spending at most budget cells on
// difflib.
type differ struct {
	a, b   []string
	budget int
	codes  []difflib.OpCode
}

func (d *differ) add(tag byte, i1, i2, j1, j2 int) {
	if i1 == i2 && j1 == j2 {
		return
	}
	if n := len(d.codes); n > 0 && tag == 'e' && d.codes[n-1].Tag == 'e' {
		d.codes[n-1].I2, d.codes[n-1].J2 = i2, j2
		return
	}
	d.codes = append(d.codes, difflib.OpCode{Tag: tag, I1: i1, I2: i2, J1: j1, J2: j2})
}

// between adds the codes turning a[i1:i2] into b[j1:j2]; with anchor, the
// lines found once in each may split it first.
func (d *differ) between(i1, i2, j1, j2 int, anchor bool) {
	head := 0
	for i1+head < i2 && j1+head < j2 && d.a[i1+head] == d.b[j1+head] {
		head++
	}
	d.add('e', i1, i1+head, j1, j1+head)
	i1, j1 = i1+head, j1+head
	tail := 0
	for i1 < i2-tail && j1 < j2-tail && d.a[i2-1-tail] == d.b[j2-1-tail] {
		tail++
	}
	ea, eb := i2-tail, j2-tail
	switch na, nb := ea-i1, eb-j1; {
	case na == 0 && nb == 0:
	case na == 0:
		d.add('i', i1, i1, j1, eb)
	case nb == 0:
		d.add('d', i1, ea, j1, j1)
	case na*nb <= d.budget:
		d.budget -= na * nb
		for _, c := range difflib.NewMatcher(d.a[i1:ea], d.b[j1:eb]).GetOpCodes() {
			d.add(c.Tag, i1+c.I1, i1+c.I2, j1+c.J1, j1+c.J2)
		}
	case anchor:
		at, bt := i1, j1
		for _, p := range uniqueCommon(d.a[i1:ea], d.b[j1:eb]) {
			d.between(at, i1+p[0], bt, j1+p[1], false)
			d.add('e', i1+p[0], i1+p[0]+1, j1+p[1], j1+p[1]+1)
			at, bt = i1+p[0]+1, j1+p[1]+1
		}
		d.between(at, ea, bt, eb, false)
	default:
		d.add('r', i1, ea, j1, eb)
	}
	d.add('e', ea, i2, eb, j2)
}

// uniqueCommon are the lines found once in a and once in b, as pairs of
// their indices, the longest run of them in the same order in both.
func uniqueCommon(a, b []string) [][2]int {
	count := func(ls []string) map[string]int {
		n := make(map[string]int, len(ls))
		for i, l := range ls {
			if _, seen := n[l]; seen {
				n[l] = -1
			} else {
				n[l] = i
			}
		}
		return n
	}
	ia, ib := count(a), count(b)
	var pairs [][2]int
	for i, l := range a {
		if ia[l] == i {
			if j, ok := ib[l]; ok && j >= 0 {
				pairs = append(pairs, [2]int{i, j})
			}
		}
	}
	// The longest increasing run of their indices in b (patience sorting):
	// tops[k] is the pair ending the best run of k+1 found so far, prev
	// the pair before each in its run.
	var tops []int
	prev := make([]int, len(pairs))
	for p := range pairs {
		k, _ := slices.BinarySearchFunc(tops, pairs[p][1], func(t, j int) int { return cmp.Compare(pairs[t][1], j) })
		prev[p] = -1
		if k > 0 {
			prev[p] = tops[k-1]
		}
		if k == len(tops) {
			tops = append(tops, p)
		} else {
			tops[k] = p
		}
	}
	if len(tops) == 0 {
		return nil
	}
	run := make([][2]int, len(tops))
	for k, p := len(tops)-1, tops[len(tops)-1]; k >= 0; k, p = k-1, prev[p] {
		run[k] = pairs[p]
	}
	return run
}

// grouped are the hunks of codes, each change with n equal lines around
// it, as difflib's GetGroupedOpCodes makes them; none when nothing
// changed.
func grouped(codes []difflib.OpCode, n int) [][]difflib.OpCode {
	if len(codes) == 0 {
		return nil
	}
	if c := &codes[0]; c.Tag == 'e' {
		c.I1, c.J1 = max(c.I1, c.I2-n), max(c.J1, c.J2-n)
	}
	if c := &codes[len(codes)-1]; c.Tag == 'e' {
		c.I2, c.J2 = min(c.I2, c.I1+n), min(c.J2, c.J1+n)
	}
	var groups [][]difflib.OpCode
	var group []difflib.OpCode
	for _, c := range codes {
		if c.Tag == 'e' && c.I2-c.I1 > 2*n {
			// A long equal run ends one hunk and begins the next.
			group = append(group, difflib.OpCode{Tag: 'e', I1: c.I1, I2: min(c.I2, c.I1+n), J1: c.J1, J2: min(c.J2, c.J1+n)})
			groups = append(groups, group)
			group = nil
			c.I1, c.J1 = max(c.I1, c.I2-n), max(c.J1, c.J2-n)
		}
		group = append(group, c)
	}
	if len(group) > 0 && (len(group) > 1 || group[0].Tag != 'e') {
		groups = append(groups, group)
	}
	return groups
}

// lineRange is a hunk's range of lines [start, stop) as a unified diff
// writes it.
func lineRange(start, stop int) string {
	switch n := stop - start; n {
	case 1:
		return fmt.Sprint(start + 1)
	case 0:
		return fmt.Sprintf("%d,0", start)
	default:
		return fmt.Sprintf("%d,%d", start+1, n)
	}
}

// cutWriter keeps whole lines while they fit in most bytes and counts
// every byte written; fit is where the lines end that leave room bytes
// free, where a text that does not fit is cut.
type cutWriter struct {
	b                  strings.Builder
	most, room, n, fit int
}

func (w *cutWriter) line(prefix, s string) {
	n := len(prefix) + len(s)
	w.n += n
	if w.n > w.most {
		return
	}
	w.b.WriteString(prefix)
	w.b.WriteString(s)
	if w.n <= w.most-w.room {
		w.fit = w.n
	}
}

func (w *cutWriter) lines(prefix string, ls []string) {
	for _, l := range ls {
		w.line(prefix, l)
	}
}

// indent is canonical JSON one member per line.
func indent(canonical []byte) (string, error) {
	var buf bytes.Buffer
	if err := json.Indent(&buf, canonical, "", "  "); err != nil {
		return "", err
	}
	buf.WriteByte('\n')
	return buf.String(), nil
}

func (m *Manager) pretty(reg *sharedosv1.ToolRegistration) (string, error) {
	if reg == nil {
		return "", nil
	}
	pub, err := m.cfg.Registry.Check(reg)
	if err != nil {
		return "", err
	}
	return indent(pub.GetCanonicalJson())
}
