package upstream

import (
	"bytes"
	"encoding/json"
	"testing"
)

// marshalChanges is true exactly when json.Marshal writes the arguments
// otherwise (then the call registers its exact request).
func TestMarshalChanges(t *testing.T) {
	for _, args := range []string{
		`{}`, `{"a":1}`, `{"text":"hello world"}`, `{"a":"\" \\"}`, `{"a":"\\\" "}`, `[1,2,{"b":null}]`,
		`{"a": 1}`, "{\"a\":1}\n", "{\n\"a\":1}", `{"a":"<b>"}`, `{"a":"x&y"}`, "{\"a\":\"\u2028\"}", "{\"a\":\"\u2029\"}",
		"{\"a\":\"\u2027\u202a\"}", `{"a":"\" ","b" :2}`, `{"n":12345678901234567890}`, `{"n":1.50e+01}`, `{"\\u003c":"\t"}`,
	} {
		b, err := json.Marshal(json.RawMessage(args))
		if err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		if want := !bytes.Equal(b, []byte(args)); marshalChanges([]byte(args)) != want {
			t.Errorf("marshalChanges(%q) = %v, json.Marshal writes %q", args, !want, b)
		}
	}
}
