package pipeline

import (
	"bytes"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

func TestDecodeArguments(t *testing.T) {
	nest := func(n int) string { return strings.Repeat(`{"a":`, n-1) + `{}` + strings.Repeat(`}`, n-1) }
	ok := []string{
		`{}`, ` { } `, `{"a":1,"b":[1,{"a":2},{"a":3}],"c":{"a":{"b":null}}}`,
		`{"a":[[],[[]]],"b":"x"}`, nest(MaxArgumentsDepth), `{"a":{"x":1},"b":{"x":1}}`,
		`{"k":"\u0000"}`, `{"a":{"A":1},"b":{"a":1}}`, // folded-equal keys in different objects
		`{"n":[-1.` + strings.Repeat("5", MaxNumberChars-3) + `]}`, `{"s":"` + strings.Repeat("9", 1000) + `"}`,
		// Every number a double holds, as written (jsonlimits.CheckNumber).
		`{"n":[0,-0.0,0e-999,1e308,-1e-320,4.9e-324,9007199254740993,` + strings.Repeat("9", MaxNumberChars) + `]}`,
		`{"s":"1e-999999"}`, // a string is a string
		// At authz-svc's bounds on values and on objects and arrays.
		`{"a":[` + strings.Repeat(`1,`, MaxArgumentValues-3) + `1]}`,
		`{"a":[` + strings.Repeat(`{},`, MaxArgumentContainers-3) + `{}]}`,
	}
	for _, s := range ok {
		if _, err := decodeArguments([]byte(s)); err != nil {
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
		// Keys equal under case folding, at any level (issue 17, item 1):
		// Go's struct decoding in a provider matches them alike.
		`{"path":"/public/a.txt","PATH":"/private/secret.txt"}`: `"path" and "PATH" differ only in case`,
		`{"x":{"Path":1,"pAtH":2}}`:                             "differ only in case",
		`{"x":[{"id":1,"ID":2}]}`:                               "differ only in case",
		"{\"k\":1,\"\u212a\":2}":                                "differ only in case", // the Kelvin sign
		"{\"s\":1,\"\u017f\":2}":                                "differ only in case", // long s
		// Longer than the number authz-svc evaluates, at any level.
		`{"n":[{"m":-1.` + strings.Repeat("5", MaxNumberChars-2) + `}]}`: "a number of 129 characters",
		`{"n":1e` + strings.Repeat("0", MaxNumberChars) + `}`:            "the limit is 128",
		// Beyond a double's range, or so small a double reads 0 (attack
		// run F2/F3), named by their location.
		`{"limit":1e-999999}`:             "at /limit: a number whose exponent is beyond ±999",
		`{"x":1e-1000001}`:                "at /x: a number whose exponent is beyond ±999",
		`{"a":[1,{"b~/c":1e-400}]}`:       "at /a/1/b~0~1c: a number so close to 0 that a double reads it as 0",
		`{"a":{"b":[[1,2,-1e400]]}}`:      "at /a/b/0/2: a number beyond a double's range",
		`{"a":1,"n":{"m":0e1000}}`:        "at /n/m: a number whose exponent",
		`{"p":"/public/x","q":[1.8e308]}`: "at /q/0: a number beyond",
		// More values than authz-svc builds (jsonlimits): the document and
		// the array are two, containers too.
		`{"a":[` + strings.Repeat(`1,`, MaxArgumentValues-2) + `1]}`:       "more than 65536 JSON values",
		`{"a":[` + strings.Repeat(`{},`, MaxArgumentContainers-2) + `{}]}`: "more than 16384 objects and arrays",
		`{"a":[` + strings.Repeat(`{"x":{}},`, 116_000) + `{}]}`:           "more than 16384 objects and arrays",
	}
	for s, want := range bad {
		_, err := decodeArguments([]byte(s))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%.80s: %v, want %q", s, err, want)
		}
	}
}

// FuzzDecodeArguments: whatever decodeArguments accepts is one valid JSON
// object, and its decoded value is the one encoding/json decodes.
func FuzzDecodeArguments(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":[1,{"b":2}]}`, `{"a":1,"a":2}`, `[]`, `{"a":1}{}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := decodeArguments(b)
		if err != nil {
			return
		}
		if !json.Valid(b) {
			t.Fatalf("accepted invalid JSON %q", b)
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		var want map[string]any
		if err := dec.Decode(&want); err != nil || want == nil {
			t.Fatalf("accepted a non-object %q", b)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("decoded %q as %#v, encoding/json as %#v", b, got, want)
		}
	})
}

// propertyNames finds the names declared anywhere the schema reaches —
// through $ref (recursive ones too), combinators, conditionals, items and
// additionalProperties — and nothing else (no pattern, no enum value).
func TestPropertyNames(t *testing.T) {
	schema := `{"type":"object","$defs":{"node":{"type":"object","properties":{"child":{"$ref":"#/$defs/node"},"label":{}}}},
		"properties":{"root":{"$ref":"#/$defs/node"},"list":{"items":{"properties":{"inItems":{}}}}},
		"allOf":[{"properties":{"inAllOf":{}}}],"if":{"properties":{"inIf":{}}},"then":{"properties":{"inThen":{}}},
		"additionalProperties":{"properties":{"inAdditional":{}}},"patternProperties":{"^x-":{"properties":{"inPattern":{}}}},
		"dependentSchemas":{"dep":{"properties":{"inDep":{}}}},"enum":[{"notAName":1}],"unused":{"properties":{"never":{}}},
		"required":["req"],"dependentRequired":{"dr":["drTarget"]}}`
	c := jsonschema.NewCompiler()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddResource("mem://s", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("mem://s")
	if err != nil {
		t.Fatal(err)
	}
	got := slices.Sorted(maps.Keys(propertyNames(sch)))
	want := []string{"child", "dep", "dr", "drTarget", "inAdditional", "inAllOf", "inDep", "inIf", "inItems", "inPattern", "inThen", "label", "list", "req", "root"}
	if !slices.Equal(got, want) {
		t.Fatalf("propertyNames = %v, want %v", got, want)
	}
}
