package jsonlimits_test

import (
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
