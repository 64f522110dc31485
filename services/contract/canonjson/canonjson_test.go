package canonjson_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"github.com/sharedos/toolshare/services/contract/internal/specvectors"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sharedos/toolshare/services/contract/canonjson"
)

type hashCase struct {
	Name      string `json:"name"`
	Canonical string `json:"canonical"`
}

func loadCases(t testing.TB) []hashCase {
	t.Helper()
	var doc struct {
		Cases []hashCase `json:"cases"`
	}
	if err := json.Unmarshal(specvectors.Read(t, "cataloghash-vectors.json"), &doc); err != nil {
		t.Fatalf("decode catalogHash vectors: %v", err)
	}
	if len(doc.Cases) == 0 {
		t.Fatal("catalogHash vectors hold no cases")
	}
	return doc.Cases
}

func canon(t *testing.T, in string) string {
	t.Helper()
	out, err := canonjson.Canonicalize([]byte(in))
	if err != nil {
		t.Fatalf("Canonicalize(%q): %v", in, err)
	}
	return string(out)
}

// Every vector's canonical text is a fixed point, and so is what you get by
// decoding it and re-encoding it with encoding/json (UTF-8 key order, HTML
// escaping, Go float formatting) then canonicalizing.
func TestVectorsCanonical(t *testing.T) {
	for _, c := range loadCases(t) {
		t.Run(c.Name, func(t *testing.T) {
			if got := canon(t, c.Canonical); got != c.Canonical {
				t.Fatalf("canonical text is not a fixed point:\n got %s\nwant %s", got, c.Canonical)
			}
			var v any
			if err := json.Unmarshal([]byte(c.Canonical), &v); err != nil {
				t.Fatal(err)
			}
			got, err := canonjson.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != c.Canonical {
				t.Fatalf("Marshal(decoded):\n got %s\nwant %s", got, c.Canonical)
			}
			var pretty bytes.Buffer
			if err := json.Indent(&pretty, []byte(c.Canonical), "", "  "); err != nil {
				t.Fatal(err)
			}
			if got := canon(t, pretty.String()); got != c.Canonical {
				t.Fatalf("indented input:\n got %s\nwant %s", got, c.Canonical)
			}
		})
	}
}

// The example of RFC 8785 section 3.2.2.
func TestRFC8785Example(t *testing.T) {
	in := `{
  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`
	want := `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`
	if got := canon(t, in); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

// The sorting example of RFC 8785 section 3.2.3.
func TestRFC8785Sorting(t *testing.T) {
	in := `{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}`
	want := "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"ö\":\"Latin Small Letter O With Diaeresis\"," +
		"\"€\":\"Euro Sign\",\"😀\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}"
	if got := canon(t, in); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestKeyOrderUTF16(t *testing.T) {
	cases := []struct{ in, want string }{
		// UTF-8 puts U+E000 (EE 80 80) before U+1F600 (F0 9F 98 80);
		// UTF-16 puts the surrogate 0xD83D before 0xE000.
		{`{"\uE000":1,"😀":2}`, `{"😀":2,"` + "\uE000" + `":1}`},
		{`{"😀":2,"` + "\uE000" + `":1}`, `{"😀":2,"` + "\uE000" + `":1}`},
		// Below U+D800 the two orders agree.
		{`{"😀":1,"\uD7FF":2}`, `{"` + "\uD7FF" + `":2,"😀":1}`},
		// Two supplementary characters order by code point.
		{"{\"\U0001F601\":1,\"😀\":2,\"𐀀\":3}", `{"𐀀":3,"😀":2,"` + "\U0001F601" + `":1}`},
		// A prefix sorts first; a shared multi-byte prefix is handled.
		{`{"ab":1,"a":2,"éb":3,"é":4,"":5}`, `{"":5,"a":2,"ab":1,"é":4,"éb":3}`},
		// Keys compare decoded, not as escaped text.
		{`{"b":1,"\u0061":2}`, `{"a":2,"b":1}`},
		{`{"\"":1,"!":2,"#":3}`, `{"!":2,"\"":1,"#":3}`},
		// Nested objects are sorted too, arrays keep their order.
		{`{"z":{"y":1,"x":[3,{"b":1,"a":2}]},"a":null}`, `{"a":null,"z":{"x":[3,{"a":2,"b":1}],"y":1}}`},
	}
	for _, c := range cases {
		if got := canon(t, c.in); got != c.want {
			t.Errorf("Canonicalize(%s)\n got %s\nwant %s", c.in, got, c.want)
		}
	}
}

func TestStrings(t *testing.T) {
	cases := []struct{ in, want string }{
		{`"<b>&amp;</b>"`, `"<b>&amp;</b>"`},
		{`"\u003cb\u003e \u0026"`, `"<b> &"`},
		{`"\u2028\u2029"`, "\"\u2028\u2029\""},
		{"\"\u2028\"", "\"\u2028\""},
		{`"\b\f\n\r\t"`, `"\b\f\n\r\t"`},
		{`"\u0008\u000C\u000a\u000D\u0009"`, `"\b\f\n\r\t"`},
		{`"\u0000\u0001\u001F\u001f"`, `"\u0000\u0001\u001f\u001f"`},
		{`"\u007f"`, "\"\x7f\""},
		{`"\/\\\""`, `"/\\\""`},
		{`"é\u00e9\u00E9"`, `"ééé"`},
		{`"\ud83d\ude00\uD83D\uDE00"`, `"😀😀"`},
		{`""`, `""`},
		{` "padded" `, `"padded"`},
	}
	for _, c := range cases {
		if got := canon(t, c.in); got != c.want {
			t.Errorf("Canonicalize(%s) = %s, want %s", c.in, got, c.want)
		}
	}
}

func TestNumbers(t *testing.T) {
	cases := []struct{ in, want string }{
		{"333333333.33333329", "333333333.3333333"},
		{"1E30", "1e+30"},
		{"4.50", "4.5"},
		{"2e-3", "0.002"},
		{"0.000001", "0.000001"},
		{"1e-7", "1e-7"},
		{"0.0000001", "1e-7"},
		{"-0", "0"},
		{"-0.0", "0"},
		{"0e10", "0"},
		{"-0e-10", "0"},
		{"100", "100"},
		{"1e2", "100"},
		{"100.000", "100"},
		{"1e21", "1e+21"},
		{"1e20", "100000000000000000000"},
		{"999999999999999999999", "1e+21"},
		{"123456789012345678901", "123456789012345680000"},
		{"9007199254740993", "9007199254740992"},
		{"999999999999999", "999999999999999"},
		{"-999999999999999", "-999999999999999"},
		{"9999999999999999", "10000000000000000"},
		{"0.1", "0.1"},
		{"-12.5", "-12.5"},
		{"1.5e300", "1.5e+300"},
		{"5e-324", "5e-324"},
		{"2e-324", "0"},
		{"1e-400", "0"},
		{"1.7976931348623157e308", "1.7976931348623157e+308"},
		{"-1.7976931348623157e308", "-1.7976931348623157e+308"},
		{"0.1e1", "1"},
		{"123e-2", "1.23"},
		{"1E+2", "100"},
		{"-1e-7", "-1e-7"},
		{"1.0000000000000001e23", "1.0000000000000001e+23"},
		{"[1, 2.0, -3e0]", "[1,2,-3]"},
	}
	for _, c := range cases {
		if got := canon(t, c.in); got != c.want {
			t.Errorf("Canonicalize(%s) = %s, want %s", c.in, got, c.want)
		}
	}
}

// IEEE 754 bit patterns and their ECMAScript form, from RFC 8785 appendix B.
func TestAppendNumberRFC8785AppendixB(t *testing.T) {
	cases := []struct {
		bits uint64
		want string
	}{
		{0x0000000000000000, "0"},
		{0x8000000000000000, "0"},
		{0x0000000000000001, "5e-324"},
		{0x8000000000000001, "-5e-324"},
		{0x7fefffffffffffff, "1.7976931348623157e+308"},
		{0xffefffffffffffff, "-1.7976931348623157e+308"},
		{0x4340000000000000, "9007199254740992"},
		{0xc340000000000000, "-9007199254740992"},
		{0x4430000000000000, "295147905179352830000"},
		{0x44b52d02c7e14af5, "9.999999999999997e+22"},
		{0x44b52d02c7e14af6, "1e+23"},
		{0x44b52d02c7e14af7, "1.0000000000000001e+23"},
		{0x444b1ae4d6e2ef4e, "999999999999999700000"},
		{0x444b1ae4d6e2ef4f, "999999999999999900000"},
		{0x444b1ae4d6e2ef50, "1e+21"},
		{0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
		{0x3eb0c6f7a0b5ed8d, "0.000001"},
		{0x41b3de4355555553, "333333333.3333332"},
		{0x41b3de4355555554, "333333333.33333325"},
		{0x41b3de4355555555, "333333333.3333333"},
		{0x41b3de4355555556, "333333333.3333334"},
		{0x41b3de4355555557, "333333333.33333343"},
		{0xbecbf647612f3696, "-0.0000033333333333333333"},
		{0x43143ff3c1cb0959, "1424953923781206.2"},
	}
	for _, c := range cases {
		f := math.Float64frombits(c.bits)
		if got := string(canonjson.AppendNumber(nil, f)); got != c.want {
			t.Errorf("AppendNumber(%#016x) = %s, want %s", c.bits, got, c.want)
		}
		// The same value written any other way canonicalizes identically.
		if got := canon(t, strconv.FormatFloat(f, 'g', -1, 64)); got != c.want {
			t.Errorf("Canonicalize(%g) = %s, want %s", f, got, c.want)
		}
	}
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		if got := string(canonjson.AppendNumber(nil, f)); got != "null" {
			t.Errorf("AppendNumber(%v) = %s, want null", f, got)
		}
	}
}

func TestRejects(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	deepObj := func(n int) string { return strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n) }
	cases := []struct {
		in   string
		kind error
		msg  string // substring of the error text
	}{
		{"", canonjson.ErrSyntax, "unexpected end of input"},
		{"  \n", canonjson.ErrSyntax, "unexpected end of input"},
		{"[1,]", canonjson.ErrSyntax, "want a value"},
		{`{"a":1,}`, canonjson.ErrSyntax, "want a string key"},
		{`{a:1}`, canonjson.ErrSyntax, "want a string key"},
		{`{'a':1}`, canonjson.ErrSyntax, "want a string key"},
		{`{"a" 1}`, canonjson.ErrSyntax, "want ':'"},
		{`{"a":1 "b":2}`, canonjson.ErrSyntax, "want ',' or '}'"},
		{`[1 2]`, canonjson.ErrSyntax, "want ',' or ']'"},
		{`[1`, canonjson.ErrSyntax, "unexpected end of input in array"},
		{`{"a":1`, canonjson.ErrSyntax, "unexpected end of input in object"},
		{"01", canonjson.ErrSyntax, "after the top-level value"},
		{"1.", canonjson.ErrSyntax, "digit after '.'"},
		{".5", canonjson.ErrSyntax, "want a value"},
		{"+1", canonjson.ErrSyntax, "want a value"},
		{"-", canonjson.ErrSyntax, "digit after '-'"},
		{"1e", canonjson.ErrSyntax, "digit in the exponent"},
		{"1e+", canonjson.ErrSyntax, "digit in the exponent"},
		{"NaN", canonjson.ErrSyntax, "want a value"},
		{"Infinity", canonjson.ErrSyntax, "want a value"},
		{"tru", canonjson.ErrSyntax, "want true"},
		{"nul", canonjson.ErrSyntax, "want null"},
		{"[] []", canonjson.ErrSyntax, "after the top-level value"},
		{"\ufeff{}", canonjson.ErrSyntax, "want a value"},
		{`"abc`, canonjson.ErrSyntax, "unterminated string"},
		{`"a\`, canonjson.ErrSyntax, "unterminated escape"},
		{`"\x"`, canonjson.ErrSyntax, `invalid escape \x`},
		{`"\u12"`, canonjson.ErrSyntax, "four hex digits"},
		{`"\u12G4"`, canonjson.ErrSyntax, "four hex digits"},
		{"\"a\tb\"", canonjson.ErrSyntax, "control character U+0009"},
		{"\"a\\n\nb\"", canonjson.ErrSyntax, "control character U+000A"},
		{"\"\xff\"", canonjson.ErrInvalidUTF8, "not UTF-8"},
		{"\"\xc0\xaf\"", canonjson.ErrInvalidUTF8, "not UTF-8"},
		{"\"\xed\xa0\x80\"", canonjson.ErrInvalidUTF8, "not UTF-8"},
		{"{\"k\xfe\":1}", canonjson.ErrInvalidUTF8, "not UTF-8"},
		{`"\ud800"`, canonjson.ErrLoneSurrogate, `high surrogate \ud800`},
		{`"\ud800\u0041"`, canonjson.ErrLoneSurrogate, `high surrogate \ud800`},
		{`"\ud800\ud800"`, canonjson.ErrLoneSurrogate, `high surrogate \ud800`},
		{`"\udc00"`, canonjson.ErrLoneSurrogate, `low surrogate \udc00`},
		{`"\uDE00\uD83D"`, canonjson.ErrLoneSurrogate, `low surrogate \ude00`},
		{`{"a":1,"a":2}`, canonjson.ErrDuplicateKey, `key "a" appears more than once`},
		{`{"a":1,"\u0061":2}`, canonjson.ErrDuplicateKey, `key "a"`},
		{`{"b":1,"a":2,"c":3,"b":4}`, canonjson.ErrDuplicateKey, `key "b"`},
		{`[{"x":{"y":1,"y":1}}]`, canonjson.ErrDuplicateKey, `key "y"`},
		{deep(canonjson.MaxDepth + 1), canonjson.ErrTooDeep, "more than 128 nested"},
		{deepObj(canonjson.MaxDepth + 1), canonjson.ErrTooDeep, "more than 128 nested"},
		{"1e400", canonjson.ErrNumberRange, "1e400 does not fit in a double"},
		{"[-1e309]", canonjson.ErrNumberRange, "does not fit"},
	}
	for _, c := range cases {
		out, err := canonjson.Canonicalize([]byte(c.in))
		if err == nil {
			t.Errorf("Canonicalize(%q) = %s, want an error", c.in, out)
			continue
		}
		var ce *canonjson.Error
		if !errors.As(err, &ce) || !errors.Is(err, c.kind) {
			t.Errorf("Canonicalize(%q) = %v, want kind %v", c.in, err, c.kind)
			continue
		}
		if !strings.Contains(err.Error(), c.msg) || !strings.HasPrefix(err.Error(), "canonjson: ") {
			t.Errorf("Canonicalize(%q) error %q lacks %q", c.in, err, c.msg)
		}
		if ce.Offset < 0 || ce.Offset > len(c.in) {
			t.Errorf("Canonicalize(%q) offset %d out of range", c.in, ce.Offset)
		}
	}
	// Exactly MaxDepth levels are fine.
	canon(t, deep(canonjson.MaxDepth))
	canon(t, deepObj(canonjson.MaxDepth))
}

func TestErrorOffset(t *testing.T) {
	_, err := canonjson.Canonicalize([]byte(`{"a":1,"b":2,"a":3}`))
	var ce *canonjson.Error
	if !errors.As(err, &ce) || ce.Offset != 13 {
		t.Fatalf("duplicate key error %v, want offset 13 (the second \"a\")", err)
	}
	if want := `canonjson: duplicate object key at byte 13: key "a" appears more than once in one object`; err.Error() != want {
		t.Fatalf("error text %q, want %q", err, want)
	}
}

func TestAppendCanonicalKeepsPrefix(t *testing.T) {
	dst := []byte("prefix:")
	out, err := canonjson.AppendCanonical(dst, []byte(`{"b":[1, 2],"a":"x"}`))
	if err != nil || string(out) != `prefix:{"a":"x","b":[1,2]}` {
		t.Fatalf("AppendCanonical = %q, %v", out, err)
	}
	out, err = canonjson.AppendCanonical(dst, []byte(`{"b":1,"b":2}`))
	if err == nil || string(out) != "prefix:" {
		t.Fatalf("AppendCanonical on error = %q, %v; want dst unchanged and an error", out, err)
	}
}

func TestMarshal(t *testing.T) {
	v := map[string]any{
		"html":  "<a href=\"x\">&</a>",
		"sep":   "a\u2028b",
		"float": 1e21,
		"small": 1e-7,
		"int":   100,
		"neg0":  math.Copysign(0, -1),
		"list":  []any{true, nil, "é"},
	}
	got, err := canonjson.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	want := "{\"float\":1e+21,\"html\":\"<a href=\\\"x\\\">&</a>\",\"int\":100,\"list\":[true,null,\"é\"],\"neg0\":0,\"sep\":\"a\u2028b\",\"small\":1e-7}"
	if string(got) != want {
		t.Fatalf("Marshal\n got %s\nwant %s", got, want)
	}
	if _, err := canonjson.Marshal(func() {}); err == nil || !strings.Contains(err.Error(), "canonjson: marshal") {
		t.Fatalf("Marshal(func) = %v, want a marshal error", err)
	}
}

// emitShuffled writes v as JSON with every object's keys in a random order,
// strings escaped the encoding/json way and numbers in Go's %g form, so the
// canonical form must undo all three.
func emitShuffled(buf *bytes.Buffer, v any, r *rand.Rand) {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteString(" ,\n")
			}
			kb, _ := json.Marshal(k)
			buf.Write(kb)
			buf.WriteString(" : ")
			emitShuffled(buf, v[k], r)
		}
		buf.WriteByte('}')
	case []any:
		buf.WriteString("[ ")
		for i, e := range v {
			if i > 0 {
				buf.WriteByte(',')
			}
			emitShuffled(buf, e, r)
		}
		buf.WriteByte(']')
	case float64:
		buf.WriteString(strconv.FormatFloat(v, 'g', -1, 64))
	default:
		b, _ := json.Marshal(v)
		buf.Write(b)
	}
}

func FuzzCanonicalize(f *testing.F) {
	for _, c := range loadCases(f) {
		f.Add([]byte(c.Canonical))
	}
	for _, s := range []string{
		`{"numbers":[333333333.33333329,1E30,4.50,2e-3,0.000001,1e-7,-0],"s":"\u20ac\u000f\u2028<>&"}`,
		`{"\uE000":1,"\ud83d\ude00":2,"a":{"b":[{"c":null}]}}`,
		`{"a":1,"a":2}`, `"\ud800"`, `[1e400]`, "\"\xff\"", `[[[[[]]]]]`, ` 1 `, `{"":""}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := canonjson.Canonicalize(in)
		if err != nil {
			var ce *canonjson.Error
			if !errors.As(err, &ce) {
				t.Fatalf("error %v is not a *canonjson.Error", err)
			}
			valid := json.Valid(in) && utf8.Valid(in)
			switch ce.Kind {
			case canonjson.ErrSyntax:
				if valid {
					t.Fatalf("refused valid JSON %q as a syntax error: %v", in, err)
				}
			case canonjson.ErrInvalidUTF8:
				if utf8.Valid(in) {
					t.Fatalf("refused UTF-8 input %q as invalid UTF-8: %v", in, err)
				}
			case canonjson.ErrTooDeep:
				// Errors are reported in reading order, so a semantic error
				// can precede a syntax error later in the input; check only
				// that the claim is plausible.
				if bytes.Count(in, []byte("["))+bytes.Count(in, []byte("{")) <= canonjson.MaxDepth {
					t.Fatalf("%q refused as too deep: %v", in, err)
				}
			case canonjson.ErrDuplicateKey, canonjson.ErrNumberRange, canonjson.ErrLoneSurrogate:
				if !utf8.Valid(in) {
					t.Fatalf("invalid UTF-8 %q not refused as such: %v", in, err)
				}
			default:
				t.Fatalf("unknown error kind %v", ce.Kind)
			}
			return
		}
		if !json.Valid(in) || !utf8.Valid(in) {
			t.Fatalf("accepted invalid input %q as %s", in, out)
		}
		if !json.Valid(out) || !utf8.Valid(out) {
			t.Fatalf("output %q of %q is not valid JSON", out, in)
		}
		again, err := canonjson.Canonicalize(out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("not idempotent: C(%q) = %q, C(C) = %q, %v", in, out, again, err)
		}
		var want, got any
		if err := json.Unmarshal(in, &want); err != nil {
			t.Fatalf("encoding/json refused accepted input %q: %v", in, err)
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(want, got) {
			t.Fatalf("meaning changed:\n in  %q → %#v\n out %q → %#v", in, want, out, got)
		}
		var shuffled bytes.Buffer
		emitShuffled(&shuffled, want, rand.New(rand.NewPCG(uint64(len(in)), 7)))
		reordered, err := canonjson.Canonicalize(shuffled.Bytes())
		if err != nil || !bytes.Equal(reordered, out) {
			t.Fatalf("key order or spelling leaked into the output:\n in       %q\n out      %q\n shuffled %q\n → %q, %v", in, out, shuffled.Bytes(), reordered, err)
		}
	})
}

const toolJSON = `{
  "name": "github.search_issues",
  "description": "Search issues and pull requests across GitHub repositories. Returns matching items with <title>, state & labels; supports qualifiers.",
  "inputSchema": {
    "type": "object",
    "properties": {
      "query": {"type": "string", "description": "GitHub search syntax, e.g. is:open label:bug"},
      "repo": {"type": "string", "pattern": "^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$"},
      "state": {"type": "string", "enum": ["open", "closed", "all"], "default": "open"},
      "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 20},
      "sort": {"type": "string", "enum": ["created", "updated", "comments"]},
      "since": {"type": "string", "format": "date-time"}
    },
    "required": ["query"],
    "additionalProperties": false
  },
  "outputSchema": {
    "type": "object",
    "properties": {
      "items": {"type": "array", "items": {"type": "object", "properties": {"number": {"type": "integer"}, "title": {"type": "string"}, "url": {"type": "string", "format": "uri"}}}},
      "total": {"type": "integer"}
    }
  },
  "annotations": {"title": "Search issues", "readOnlyHint": true, "openWorldHint": true},
  "metadata": {"source": "mcp:github", "namespace": "github"}
}`

func BenchmarkCanonicalize(b *testing.B) {
	in := []byte(toolJSON)
	out, err := canonjson.Canonicalize(in)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("indented_tool", func(b *testing.B) {
		b.SetBytes(int64(len(in)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := canonjson.Canonicalize(in); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("already_canonical_tool", func(b *testing.B) {
		b.SetBytes(int64(len(out)))
		b.ReportAllocs()
		buf := make([]byte, 0, len(out))
		for b.Loop() {
			if _, err := canonjson.AppendCanonical(buf[:0], out); err != nil {
				b.Fatal(err)
			}
		}
	})
}
