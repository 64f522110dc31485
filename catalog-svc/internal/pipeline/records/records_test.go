package records_test

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline/records"
	"github.com/sharedos/toolshare/services/platform/telemetry"
)

// The escaping itself is telemetry.Escape's (its tests); EscapeTool caps
// a name at MaxToolBytes and sums what was sent.
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

// TestToolCapIsTheSpanCap: a record's requested_tool and the
// sharedos.tool.requested of the bridge's and the kernel's spans are one
// string only while both caps are one number.
func TestToolCapIsTheSpanCap(t *testing.T) {
	if records.MaxToolBytes != telemetry.MaxValueBytes {
		t.Fatalf("records.MaxToolBytes = %d, telemetry.MaxValueBytes = %d: a record and its spans would show different names",
			records.MaxToolBytes, telemetry.MaxValueBytes)
	}
}
