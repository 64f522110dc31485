package pipeline

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestCheckArguments(t *testing.T) {
	nest := func(n int) string { return strings.Repeat(`{"a":`, n-1) + `{}` + strings.Repeat(`}`, n-1) }
	ok := []string{
		`{}`, ` { } `, `{"a":1,"b":[1,{"a":2},{"a":3}],"c":{"a":{"b":null}}}`,
		`{"a":[[],[[]]],"b":"x"}`, nest(MaxArgumentsDepth), `{"a":{"x":1},"b":{"x":1}}`,
		`{"k":"\u0000"}`,
	}
	for _, s := range ok {
		if err := checkArguments([]byte(s)); err != nil {
			t.Errorf("%.80s: %v", s, err)
		}
	}
	bad := map[string]string{
		nest(MaxArgumentsDepth + 1):  "nested deeper",
		`{"a":1,"a":2}`:              "twice",
		`{"x":{"a":1,"b":{},"a":2}}`: "twice",
		`{"x":[{"a":1,"a":1}]}`:      "twice",
		`{"a":1}x`:                   "more than one",
		`{"a":1} {}`:                 "more than one",
		`[{"a":1}]`:                  "not a JSON object",
		``:                           "not a JSON object",
		`{"a":}`:                     "not valid JSON",
		`{"a":1`:                     "not valid JSON",
		"{\"a\":\"\xc3\x28\"}":       "UTF-8",
		`{"a":"` + strings.Repeat("x", MaxArgumentsBytes) + `"}`: "limit",
	}
	for s, want := range bad {
		err := checkArguments([]byte(s))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%.80s: %v, want %q", s, err, want)
		}
	}
}

// FuzzCheckArguments: whatever checkArguments accepts is one valid JSON
// object that encoding/json decodes.
func FuzzCheckArguments(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":[1,{"b":2}]}`, `{"a":1,"a":2}`, `[]`, `{"a":1}{}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if checkArguments(b) != nil {
			return
		}
		if !json.Valid(b) {
			t.Fatalf("accepted invalid JSON %q", b)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(b, &m); err != nil || m == nil {
			t.Fatalf("accepted a non-object %q", b)
		}
	})
}
