package protocol

import (
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// fold keys two strings alike exactly when strings.EqualFold says they
// are: every rune against each of its case folding orbit and a rune of
// another orbit, and invalid UTF-8.
func TestFoldIsEqualFold(t *testing.T) {
	for r := rune(0); r <= unicode.MaxRune; r++ {
		for f := unicode.SimpleFold(r); ; f = unicode.SimpleFold(f) {
			if fold(string(r)) != fold(string(f)) {
				t.Fatalf("fold(%q) = %q, fold(%q) = %q: EqualFold says they are alike", r, fold(string(r)), f, fold(string(f)))
			}
			if f == r {
				break
			}
		}
		other := r + 1
		if a, b := string(r), string(other); strings.EqualFold(a, b) != (fold(a) == fold(b)) {
			t.Fatalf("%q and %q: EqualFold %v, fold %q and %q", a, b, strings.EqualFold(a, b), fold(a), fold(b))
		}
	}
	for _, p := range [][2]string{{"\xff", "\xfe"}, {"a\xff", "A\xfe"}, {"ſ", "S"}, {"K", "k"}, {"ab", "abc"}} {
		if strings.EqualFold(p[0], p[1]) != (fold(p[0]) == fold(p[1])) {
			t.Errorf("%q and %q: EqualFold %v, fold %q and %q", p[0], p[1], strings.EqualFold(p[0], p[1]), fold(p[0]), fold(p[1]))
		}
	}
}

// manyKeys is a tools/list request whose params hold n keys, the last
// one last repeated in another case when clash is set.
func manyKeys(n int, clash bool) []byte {
	var b strings.Builder
	b.WriteString(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"k` + strconv.Itoa(i) + `":0`)
	}
	if clash {
		b.WriteString(`,"K` + strconv.Itoa(n-1) + `":0`)
	}
	b.WriteString(`}}`)
	return []byte(b.String())
}

func TestManyKeys(t *testing.T) {
	if _, err := Parse(manyKeys(50_000, false)); err != nil {
		t.Fatalf("50,000 distinct keys: %v", err)
	}
	_, err := Parse(manyKeys(50_000, true))
	if err == nil || !strings.Contains(err.Error(), `"k49999" and "K49999" differ only in case`) {
		t.Fatalf("a clash after 50,000 keys: %v", err)
	}
}

// BenchmarkParseManyKeys: a body of 40,000 keys (≈ 430 KB) took 4.8 s
// when every pair of keys was compared.
func BenchmarkParseManyKeys(b *testing.B) {
	body := manyKeys(40_000, false)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := Parse(body); err != nil {
			b.Fatal(err)
		}
	}
}
