package jsonlimits_test

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
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

// CheckNumber takes every integer and decimal a double holds, written as
// long as MaxNumberChars allows, and refuses what a double reads as
// infinite, or as 0 when it is not 0 (attack run F2/F3: 1e-999999 cost a
// schema validator 25 ms per number and 1e-1000001 panicked it; 1e-400
// passed "exclusiveMinimum": 0 and reached the tool as 0).
func TestCheckNumber(t *testing.T) {
	long := func(c string, n int) string { return strings.Repeat(c, n) }
	taken := []string{
		"0", "-0", "0.0", "-0e0", "0e999", "0E-999", "0e+0000000000000000999",
		"1", "-1", "42", "3.14", "1e308", "-1.7976931348623157e308", "1.7976931348623157E+308",
		"1e-300", "2.2250738585072014e-308", "1e-320", "4.9e-324", "3e-324", "-3e-324",
		"9007199254740993", "12345678901234567890.5",
		long("9", jsonlimits.MaxNumberChars),                 // 1e128, every digit
		"-0." + long("0", jsonlimits.MaxNumberChars-4) + "1", // 1e-125
		"1" + long("0", 100) + "e-400",                       // 1e-300, an exponent past ±400 as written
		"0." + long("0", 110) + "1e+419",                     // 1e308
		"1e" + long("0", jsonlimits.MaxNumberChars-3) + "5",  // 1e5, the exponent's leading zeros aside
	}
	for _, n := range taken {
		if err := jsonlimits.CheckNumber(n); err != nil {
			t.Errorf("CheckNumber(%.40s) = %v, want nil", n, err)
		}
	}
	for n, want := range map[string]string{
		long("9", jsonlimits.MaxNumberChars+1): "a number of 129 characters; the limit is 128",
		"1e-999999":                            "exponent is beyond ±999",
		"1e-1000001":                           "exponent is beyond ±999",
		"1e999999":                             "exponent is beyond ±999",
		"0e-999999":                            "exponent is beyond ±999",
		"-0E+1000":                             "exponent is beyond ±999",
		"1e400":                                "beyond a double's range",
		"-1e309":                               "beyond a double's range",
		"1.8e308":                              "beyond a double's range",
		"1e-400":                               "reads it as 0",
		"-1e-400":                              "reads it as 0",
		"2e-324":                               "reads it as 0",
		"0.0001e-321":                          "reads it as 0",
		"1" + long("0", 100) + "e-500":         "reads it as 0",
	} {
		err := jsonlimits.CheckNumber(n)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckNumber(%.40s) = %v, want %q", n, err, want)
		}
	}
}

// shapeOf is the oracle of Measure: the document decoded, then walked.
func shapeOf(doc any, depth int, s *jsonlimits.Shape) {
	s.Values++
	switch x := doc.(type) {
	case map[string]any:
		s.Containers++
		s.Depth = max(s.Depth, depth+1)
		for _, e := range x {
			shapeOf(e, depth+1, s)
		}
	case []any:
		s.Containers++
		s.Depth = max(s.Depth, depth+1)
		for _, e := range x {
			shapeOf(e, depth+1, s)
		}
	}
}

// FuzzCheckNumber: a number CheckNumber takes reads as a finite double,
// which is 0 only when its every digit is.
func FuzzCheckNumber(f *testing.F) {
	for _, s := range []string{"0", "1e-400", "1e400", "4.9e-324", "-12.5E+3", "0e-999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, n string) {
		var v json.Number
		if json.Unmarshal([]byte(n), &v) != nil || string(v) != n {
			return // not a JSON number as written
		}
		if jsonlimits.CheckNumber(n) != nil {
			return
		}
		x, err := strconv.ParseFloat(n, 64)
		mantissa, _, _ := strings.Cut(strings.ToLower(n), "e")
		if err != nil || math.IsInf(x, 0) || (x == 0) != !strings.ContainsAny(mantissa, "123456789") {
			t.Fatalf("took %q, which a double reads as %v (%v)", n, x, err)
		}
	})
}

var measureSeeds = []string{
	`1`, `"x"`, `{}`, `[]`, `[[]]`, `{"a":{}}`, `{"a":[1,2,{"b":null}],"c":"}]{[,"}`,
	` { "a" : [ 1 , 2 ] , "b" : { } } `, `{"s":"\\\"","t":[true,false,null]}`,
	`[{"x":{}},{"x":{}},{"x":{}}]`, `{"k":"\\\\","l":["\\\"]"]}`,
}

// Measure counts what decoding builds: every value (containers included,
// keys not), the containers, and the depth Scan reports.
func TestMeasure(t *testing.T) {
	for _, in := range measureSeeds {
		var doc any
		if err := json.Unmarshal([]byte(in), &doc); err != nil {
			t.Fatal(err)
		}
		var want jsonlimits.Shape
		shapeOf(doc, 0, &want)
		if got := jsonlimits.Measure([]byte(in), jsonlimits.Shape{}); got != want {
			t.Errorf("Measure(%s) = %+v, want %+v", in, got, want)
		}
		if d, _ := jsonlimits.Scan([]byte(in), 0); d != want.Depth {
			t.Errorf("Scan(%s) = %d, Measure's depth %d", in, d, want.Depth)
		}
	}
}

// Measure stops at the first bound passed: a hostile document costs one
// short scan, and the shape it returns passes the bound.
func TestMeasureStopsPastABound(t *testing.T) {
	ones := []byte("[" + strings.Repeat("1,", 1<<20) + "1]")
	limit := jsonlimits.Shape{Values: 1000}
	if s := jsonlimits.Measure(ones, limit); s.Values != 1001 || !s.Exceeds(limit) {
		t.Errorf("Measure = %+v, want it stopped at 1,001 values", s)
	}
	objects := []byte("[" + strings.Repeat(`{"x":{}},`, 1<<16) + "{}]")
	limit = jsonlimits.Shape{Containers: 100}
	if s := jsonlimits.Measure(objects, limit); s.Containers != 101 || !s.Exceeds(limit) {
		t.Errorf("Measure = %+v, want it stopped at 101 containers", s)
	}
	within := jsonlimits.Shape{Depth: 3, Values: 5, Containers: 3}
	if s := jsonlimits.Measure([]byte(`{"a":[{"b":1}]}`), within); s != (jsonlimits.Shape{Depth: 3, Values: 4, Containers: 3}) || s.Exceeds(within) {
		t.Errorf("Measure = %+v within %+v", s, within)
	}
}

func FuzzMeasure(f *testing.F) {
	for _, s := range measureSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var doc any
		if json.Unmarshal(raw, &doc) != nil {
			return
		}
		var want jsonlimits.Shape
		shapeOf(doc, 0, &want)
		got := jsonlimits.Measure(raw, jsonlimits.Shape{})
		if jsonlimits.RepeatsKey(raw, doc) {
			// A repeated key decodes to one value: Measure counts both.
			if got.Depth < want.Depth || got.Values < want.Values || got.Containers < want.Containers {
				t.Errorf("Measure(%q) = %+v, less than decoded %+v", raw, got, want)
			}
		} else if got != want {
			t.Errorf("Measure(%q) = %+v, want %+v", raw, got, want)
		}
	})
}
