package telemetry_test

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sharedos/toolshare/services/platform/telemetry"
)

func TestEscapeValue(t *testing.T) {
	cases := map[string]string{
		"files.read":         "files.read",
		"files read":         "files read",
		"fílés.read":         "fílés.read",
		"files\x00read":      `files\x00read`,
		"f\xffx":             `f\xffx`,
		`a"b\c`:              `a\"b\\c`,
		"a\u202eb":           `a\u202eb`,
		"x\n{\"level\":1}":   `x\n{\"level\":1}`,
		"\x1b[31mred\x1b[0m": `\x1b[31mred\x1b[0m`,
		"":                   "",
	}
	for in, want := range cases {
		if got := telemetry.EscapeValue(in); got != want {
			t.Errorf("EscapeValue(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestEscapeValueCaps(t *testing.T) {
	for _, in := range []string{
		strings.Repeat("a", telemetry.MaxValueBytes), strings.Repeat("a", telemetry.MaxValueBytes+1),
		strings.Repeat("é", 200), strings.Repeat("\x00", 100), "\n" + strings.Repeat("a", 3<<20),
	} {
		got := telemetry.EscapeValue(in)
		if len(got) > telemetry.MaxValueBytes || !utf8.ValidString(got) || strings.ContainsAny(got, "\x00\n") {
			t.Errorf("len %d input: escaped to %d bytes, or not valid text: %q", len(in), len(got), got)
		}
		if len(in) == telemetry.MaxValueBytes && got != in {
			t.Errorf("a value of exactly %d printable bytes must be kept whole", telemetry.MaxValueBytes)
		}
		if len(in) > telemetry.MaxValueBytes && !strings.HasSuffix(got, "…") {
			t.Errorf("a cut value must say so: %q", got[len(got)-8:])
		}
	}
}

func FuzzEscape(f *testing.F) {
	f.Add("files.read")
	f.Add("\x00\xff")
	f.Fuzz(func(t *testing.T, s string) {
		got := telemetry.EscapeValue(s)
		if len(got) > telemetry.MaxValueBytes || !utf8.ValidString(got) || strings.ContainsRune(got, 0) {
			t.Fatalf("EscapeValue(%q) = %q", s, got)
		}
		// Oracle: uncut, the result is exactly strconv.Quote's body.
		if q := strconv.Quote(s); len(q)-2 <= telemetry.MaxValueBytes && got != q[1:len(q)-1] {
			t.Fatalf("EscapeValue(%q) = %q, strconv.Quote gives %s", s, got, q)
		}
	})
}
