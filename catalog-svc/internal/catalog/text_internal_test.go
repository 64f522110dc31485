package catalog

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// refusedOracle is the rule of checkText stated from Unicode's categories.
func refusedOracle(r rune) bool {
	switch {
	case r == '\n' || r == '\t':
		return false
	case unicode.Is(unicode.Cc, r), unicode.Is(unicode.Cf, r):
		return true
	case r >= 0xE0000 && r <= 0xE007F, r >= 0xE0100 && r <= 0xE01EF:
		return true
	}
	return false
}

// FuzzCheckText holds checkText to the oracle: accepted text is valid UTF-8
// with no refused rune; a refusal points at the first refused rune (or the
// first invalid byte) and names its code point.
func FuzzCheckText(f *testing.F) {
	for _, s := range []string{"", "plain", "a\nb\tc", "x\u202ey", "\x1b[31m", "\u200b", "é日本😀", "a\xffb", "\U000E0041", "\u00ad", "\U000E0100", "\r"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := checkText("description", s)
		first, firstAt := rune(-1), -1
		for i := 0; i < len(s); {
			r, size := utf8.DecodeRuneInString(s[i:])
			if (r == utf8.RuneError && size <= 1) || refusedOracle(r) {
				first, firstAt = r, i
				break
			}
			i += size
		}
		if firstAt < 0 {
			if err != nil {
				t.Fatalf("checkText(%q) = %v, oracle accepts", s, err)
			}
			return
		}
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != "description" {
			t.Fatalf("checkText(%q) = %v, oracle refuses U+%04X at byte %d", s, err, first, firstAt)
		}
		if !strings.Contains(ve.Detail, fmt.Sprintf("at byte %d", firstAt)) {
			t.Fatalf("checkText(%q) detail %q, want the first offender at byte %d", s, ve.Detail, firstAt)
		}
		if ve.Rule == RulePoisoning && !strings.Contains(ve.Detail, fmt.Sprintf("U+%04X ", first)) {
			t.Fatalf("checkText(%q) detail %q does not name U+%04X", s, ve.Detail, first)
		}
	})
}

// Every rune in the planes the oracle cares about, not just fuzzed ones.
func TestCheckTextMatchesOracleExhaustively(t *testing.T) {
	for r := rune(0); r <= 0xE01EF; r++ {
		if r >= 0xD800 && r <= 0xDFFF {
			continue // surrogates are not encodable in UTF-8
		}
		err := checkText("f", string(r))
		if got, want := err != nil, refusedOracle(r); got != want {
			t.Fatalf("U+%04X: refused=%v, oracle says %v (%v)", r, got, want, err)
		}
	}
}
