package redact

import (
	"encoding/json"
	"testing"
)

// A number's renderings are short whatever its JSON text: a long argument of
// numbers with huge exponents cannot multiply into megabytes of forms (found
// by review: the plain rendering of 1e305 is 306 digits).
func TestNumberFormsAreShort(t *testing.T) {
	for _, n := range []string{"100000e300", "-1.7976931348623157e308", "1.2345678901234567e-300", "123456789012345678901234567890",
		"0.00000012345678901234567", "9007199254740993", "-0.0"} {
		forms := numberForms(json.Number(n))
		for _, f := range forms[1:] {
			if len(f) > 32 {
				t.Errorf("%s: form %q is %d bytes", n, f, len(f))
			}
		}
	}
}
