package mcpserver

import "testing"

// unquote leaves out of a refusal's reason what may be an argument's value
// — double-quoted text, the number or the character encoding/json names —
// and keeps the rest of the message as it is.
func TestUnquote(t *testing.T) {
	for in, want := range map[string]string{
		"json: cannot unmarshal number 4111222333e300 into Go struct field X of type float64": "json: cannot unmarshal number … into Go struct field X of type float64",
		"json: cannot unmarshal number -1.5e999 into Go struct field":                         "json: cannot unmarshal number … into Go struct field",
		"cannot unmarshal number into Go struct field":                                        "cannot unmarshal number into Go struct field",
		"invalid character 'x' looking for beginning of value":                                "invalid character '…' looking for beginning of value",
		`invalid character '\n' in string literal`:                                            "invalid character '…' in string literal",
		`invalid character '\'' looking for beginning of value`:                               "invalid character '…' looking for beginning of value",
		`invalid character '\x01' in string literal`:                                          "invalid character '…' in string literal",
		"must be 'application/json'":                                                          "must be 'application/json'",
		"can't read it and won't retry":                                                       "can't read it and won't retry",
		`header "eu-west-secret" does not match`:                                              `header "…" does not match`,
	} {
		if got := unquote(in); got != want {
			t.Errorf("unquote(%q) = %q, want %q", in, got, want)
		}
	}
}
