package canonjson

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
	"unicode/utf16"
)

// compareUTF16 must agree with comparing the actual UTF-16 encodings.
func TestCompareUTF16AgreesWithEncoding(t *testing.T) {
	alphabet := []rune{0, 'a', 'b', 0x7f, 0x80, 0xe9, 0x7ff, 0x800, 0xd7ff, 0xe000, 0xfb33, 0xffff, 0x10000, 0x1f600, 0x1f601, 0x10ffff}
	r := rand.New(rand.NewPCG(1, 2))
	randString := func() string {
		rs := make([]rune, r.IntN(4))
		for i := range rs {
			rs[i] = alphabet[r.IntN(len(alphabet))]
		}
		return string(rs)
	}
	for range 20000 {
		a, b := randString(), randString()
		want := slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
		if got := compareUTF16([]byte(a), []byte(b)); cmp.Compare(got, 0) != want {
			t.Fatalf("compareUTF16(%+q, %+q) = %d, want sign %d", a, b, got, want)
		}
	}
}
