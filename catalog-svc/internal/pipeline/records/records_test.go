package records_test

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline/records"
)

func TestEscape(t *testing.T) {
	cases := map[string]string{
		"files.read":    "files.read",
		"files read":    "files read",
		"fílés.read":    "fílés.read",
		"files\x00read": `files\x00read`,
		"f\xffx":        `f\xffx`,
		`a"b\c`:         `a\"b\\c`,
		"a\u202eb":      `a\u202eb`,
		"":              "",
	}
	for in, want := range cases {
		if got, _ := records.EscapeTool(in); got != want {
			t.Errorf("EscapeTool(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestEscapeCaps(t *testing.T) {
	for _, in := range []string{
		strings.Repeat("a", 256), strings.Repeat("a", 257), strings.Repeat("é", 200),
		strings.Repeat("\x00", 100), strings.Repeat("a", 1<<20),
	} {
		got, sum := records.EscapeTool(in)
		if len(got) > records.MaxToolBytes || !utf8.ValidString(got) || strings.ContainsRune(got, 0) {
			t.Errorf("len %d input: escaped to %d bytes / invalid", len(in), len(got))
		}
		if h := sha256.Sum256([]byte(in)); sum != hex.EncodeToString(h[:]) {
			t.Errorf("sha mismatch")
		}
		if len(in) == 256 && got != in {
			t.Errorf("a name of exactly 256 printable bytes must be kept whole")
		}
		if len(in) > 256 && !strings.HasSuffix(got, "…") {
			t.Errorf("a cut name must say so: %q", got[len(got)-8:])
		}
	}
}

func FuzzEscape(f *testing.F) {
	f.Add("files.read")
	f.Add("\x00\xff")
	f.Fuzz(func(t *testing.T, s string) {
		got := records.Escape(s, records.MaxToolBytes)
		if len(got) > records.MaxToolBytes || !utf8.ValidString(got) || strings.ContainsRune(got, 0) {
			t.Fatalf("Escape(%q) = %q", s, got)
		}
		// Oracle: uncut, the result is exactly strconv.Quote's body.
		if q := strconv.Quote(s); len(q)-2 <= records.MaxToolBytes && got != q[1:len(q)-1] {
			t.Fatalf("Escape(%q) = %q, strconv.Quote gives %s", s, got, q)
		}
	})
}
