package jsonlimits_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/sharedos/toolshare/services/contract/jsonlimits"
)

func TestScan(t *testing.T) {
	deep := strings.Repeat("[", 100000) + strings.Repeat("]", 100000)
	cases := []struct {
		name     string
		in       string
		limit    int
		depth    int
		balanced bool
	}{
		{"scalar", `"x"`, 64, 0, true},
		{"flat object", `{"a":1}`, 64, 1, true},
		{"nested", `{"a":[{"b":[]}]}`, 64, 4, true},
		{"brackets inside strings", `{"a":"[[[{{{\"]]]"}`, 64, 1, true},
		{"at the cap", strings.Repeat("[", 64) + strings.Repeat("]", 64), 64, 64, true},
		{"past the cap stops early", deep, 64, 65, false},
		{"no cap", deep, 0, 100000, true},
		{"unclosed", `{"a":[1`, 64, 2, false},
		{"extra close", `{}]`, 64, 1, false},
		{"unterminated string", `{"a":"x`, 64, 1, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, ok := jsonlimits.Scan([]byte(c.in), c.limit)
			if d != c.depth || ok != c.balanced {
				t.Fatalf("Scan = %d, %v; want %d, %v", d, ok, c.depth, c.balanced)
			}
		})
	}
}

func ExampleScan() {
	d, ok := jsonlimits.Scan([]byte(`{"path":"/public/a.txt","opts":{"x":[1,2]}}`), 64)
	fmt.Println(d, ok)
	// Output: 3 true
}

func TestRepeatsKey(t *testing.T) {
	for in, want := range map[string]bool{
		`{"path":"/public/a.txt","path":"/private/b.txt"}`: true,
		`{"a":{"x":1,"y":2,"x":3}}`:                        true,
		`{"a":[1,{"b":[{"c":true,"c":false}]}]}`:           true,
		`{"path":1,"p\u0061th":2}`:                         true,
		`{"a":{"x":1},"b":{"x":1},"x":[{"x":1},{"x":2}]}`:  false,
		`{"a:b":"c:d","k":"\":\"","e":"\\"}`:               false,
		`{"a":{},"b":[],"c":"\\\\\":"}`:                    false,
		`[{"a":1},{"a":2}]`:                                false,
	} {
		var doc any
		if err := json.Unmarshal([]byte(in), &doc); err != nil {
			t.Fatal(err)
		}
		if got := jsonlimits.RepeatsKey([]byte(in), doc); got != want {
			t.Errorf("RepeatsKey(%s) = %v, want %v", in, got, want)
		}
	}
}
