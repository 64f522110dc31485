package redact_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sharedos/toolshare/services/contract/redact"
)

func TestArguments(t *testing.T) {
	cases := []struct {
		name, text, args string
		gone             []string
		keep             []string
	}{
		{"path in a reason", "role engineer may not read /private/CANARY-1234", `{"path":"/private/CANARY-1234"}`,
			[]string{"CANARY-1234"}, []string{"role engineer may not read "}},
		{"cleaned form of a traversal", "role engineer may not read /private/CANARY-9", `{"path":"/public/../private/CANARY-9"}`,
			[]string{"CANARY-9"}, []string{"may not read"}},
		{"backslashes", "may not read /private/x-secret", `{"path":"\\private\\x-secret"}`, []string{"x-secret"}, nil},
		{"nested values", "found tok-ABCDEF in the query", `{"q":{"deep":["tok-ABCDEF"]}}`, []string{"tok-ABCDEF"}, []string{"found "}},
		// Short strings, numbers and booleans: as whole tokens only
		// (issue 17, item 17: "limit": 4111222333 reached a record).
		{"short value as a token", "may not read /a", `{"p":"/a"}`, []string{"/a"}, []string{"may not read "}},
		{"short value inside a word stays", "a path was given", `{"p":"a"}`, nil, []string{"path", "was"}},
		{"number", "at /limit: maximum: got 4111222333, want 100", `{"limit":4111222333}`, []string{"4111222333"}, []string{"want 100", "/limit"}},
		{"number inside a longer one stays", "got 24111222333", `{"limit":4111222333}`, nil, []string{"24111222333"}},
		// A number as a policy or provider renders it: Go's %v and %g,
		// JavaScript, Python's float.
		{"number as a float", "card 4111111111111111.0 refused", `{"n":4111111111111111}`, []string{"111", "].0"}, []string{"card ", " refused"}},
		{"number in exponent form", "card 4.111111111111111e+15 refused", `{"n":4111111111111111}`, []string{"111", "e+15"}, []string{"card ", " refused"}},
		{"number in JavaScript's exponent form", "got 1e-7 back", `{"n":0.0000001}`, []string{"1e-7"}, []string{"got ", " back"}},
		{"a number that reads as 0 leaves 0 alone", "exit code 0", `{"n":1e-400}`, nil, []string{"exit code 0"}},
		{"number written with an exponent", "got 4111222333 and 4.111222333E+09", `{"n":4.111222333e9}`, []string{"4111222333", "4.111222333"}, []string{"got ", " and "}},
		{"boolean", "flag true is not allowed", `{"f":true}`, []string{" true "}, []string{"flag ", " is not allowed"}},
		{"short quoted", "value 'ab' does not match", `{"x":"ab"}`, []string{"'ab'"}, []string{"value '", "' does not match"}},
		{"no arguments", "policy says no", `{}`, nil, []string{"policy says no"}},
		{"a segment of a value", "tok-S3CR3TVALUE may not be read", `{"path":"/private/tok-S3CR3TVALUE"}`,
			[]string{"S3CR3T"}, []string{" may not be read"}},
		{"a segment ending a sentence", "may not read tok-S3CR3TVALUE.", `{"path":"/private/tok-S3CR3TVALUE"}`,
			[]string{"S3CR3T"}, []string{"may not read "}},
		{"what an error could not parse of a value", `parsing time "2024-01-01Tapi_key_ABCDEF0123456789": cannot parse "api_key_ABCDEF0123456789" as "15"`,
			`{"when":"2024-01-01Tapi_key_ABCDEF0123456789"}`, []string{"ABCDEF", "api_key"}, []string{"parsing time", "cannot parse", `as "15"`}},
		{"the rest of a value cut inside a word", `cannot parse "S3CR3TTOKEN99" as "15"`, `{"when":"2024-01-01TS3CR3TTOKEN99"}`,
			[]string{"S3CR3T"}, []string{"cannot parse", `as "15"`}},
		{"letters a parser cut from a word with a digit", `cannot parse "password" as "15"`, `{"when":"2024-01-01Tpassword"}`,
			[]string{"password"}, []string{"cannot parse", `as "15"`}},
		{"the letters after a value's digits", `unknown unit "xhunter" in duration "5xhunter"`, `{"d":"5xhunter"}`,
			[]string{"hunter"}, []string{"unknown unit", "in duration"}},
		{"a word's letters after its digits", "TVALUE is not allowed", `{"k":"S3CR3TVALUE"}`, []string{"TVALUE"}, []string{"is not allowed"}},
		{"the start of a word with a digit stays", "user alice may not read the report file", `{"owner":"user42","path":"/q/report2024.pdf","n":"file1.txt"}`,
			nil, []string{"user alice may not read the report file"}},
		{"the end of a word found after its start", "abcd refused", `{"k":"xabcd1abcd"}`, []string{"abcd"}, []string{" refused"}},
		{"a long rest of a value, letters only", `unknown unit "secretpassphrase" in duration`, `{"d":"5xsecretpassphrase"}`,
			[]string{"passphrase"}, []string{"unknown unit", "in duration"}},
		{"a word a value holds inside another stays", "role engineer may read /public/readme.md", `{"path":"/public/readme.md","q":"engineering"}`,
			[]string{"readme"}, []string{"role engineer may read "}},
		{"a word of a value inside a piece", "denied: secretword-7", `{"q":"the secretword is here"}`, []string{"secretword"}, []string{"denied: "}},
		// A quoted string shows a value escaped: a policy's sprintf of a
		// collection (JSON), a Go error (strconv.Quote).
		{"escaped in JSON", `bad options {"k": "sk-live\"9f8e"}`, `{"k":"sk-live\"9f8e"}`, []string{"9f8e"}, []string{"bad options"}},
		{"escaped by strconv.Quote", `parsing "pass\tword": invalid`, `{"p":"pass\tword"}`, []string{"word"}, []string{"parsing", "invalid"}},
		{"invalid JSON redacts nothing", "x /private/zzz", `{`, nil, []string{"/private/zzz"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := redact.Arguments(c.text, []byte(c.args))
			if once := redact.ValuesOf([]byte(c.args)).Redact(c.text); once != got {
				t.Errorf("ValuesOf(args).Redact = %q, Arguments = %q", once, got)
			}
			for _, g := range c.gone {
				if strings.Contains(got, g) {
					t.Errorf("%q still contains %q", got, g)
				}
			}
			for _, k := range c.keep {
				if !strings.Contains(got, k) {
					t.Errorf("%q lost %q", got, k)
				}
			}
		})
	}
}

func TestEqualValuesStayEqual(t *testing.T) {
	a := redact.Arguments("read /private/a.txt", []byte(`{"path":"/private/a.txt"}`))
	b := redact.Arguments("write /private/a.txt", []byte(`{"path":"/private/a.txt"}`))
	if strings.TrimPrefix(a, "read ") != strings.TrimPrefix(b, "write ") {
		t.Fatalf("%q vs %q", a, b)
	}
}

// One call's values, collected once, redact each of its texts alike.
func TestValuesRedactSeveralTexts(t *testing.T) {
	args := []byte(`{"path":"/private/a.txt","limit":7}`)
	v := redact.ValuesOf(args)
	for _, text := range []string{"file:/private/a.txt", "role engineer may not read /private/a.txt", "limit 7 reached", ""} {
		got := v.Redact(text)
		if want := redact.Arguments(text, args); got != want {
			t.Errorf("Redact(%q) = %q, Arguments = %q", text, got, want)
		}
		if strings.Contains(got, "a.txt") || strings.Contains(got, " 7 ") {
			t.Errorf("Redact(%q) = %q kept a value", text, got)
		}
	}
	if got := redact.ValuesOf(nil).Redact("x /private/a.txt"); got != "x /private/a.txt" {
		t.Errorf("no arguments changed the text: %q", got)
	}
}

// KeysAndValuesOf redacts the objects' keys that are data, at any depth, by
// the rules of string values (a short one only where it stands as a whole
// token); keys that are names stay. ValuesOf leaves keys, so a schema error
// keeps its location ("at /limit").
func TestKeysAndValuesOf(t *testing.T) {
	args := []byte(`{"files":[{"/private/key-secret.txt":{"a.b":1,"max_files":2}}],"accounts":{"4111222333444555":1},` +
		`"tokens":{"ghp_16C7e42F292c6912E7710c838347Ae178B4a":1,"x1234":2}}`)
	text := "may not write /private/key-secret.txt: a.b is set, a.bc is not; files over max_files; " +
		"account 4111222333444555, token ghp_16C7e42F292c6912E7710c838347Ae178B4a, x1234"
	got := redact.KeysAndValuesOf(args).Redact(text)
	want := "may not write " + redact.Digest("/private/key-secret.txt") + ": " + redact.Digest("a.b") + " is set, a.bc is not; files over max_files; " +
		"account " + redact.Digest("4111222333444555") + ", token " + redact.Digest("ghp_16C7e42F292c6912E7710c838347Ae178B4a") + ", " + redact.Digest("x1234")
	if got != want {
		t.Errorf("KeysAndValuesOf(args).Redact = %q, want %q", got, want)
	}
	if got := redact.ValuesOf(args).Redact(text); got != text {
		t.Errorf("ValuesOf(args).Redact = %q, want the keys kept", got)
	}
}

// With adds a value chosen outside the arguments (the URI of a
// resources/read), collected like a string argument, to those collected.
func TestValuesWith(t *testing.T) {
	v := redact.ValuesOf([]byte(`{"n":7}`)).With("test://template/uri-secret/data")
	got := v.Redact("read resource:test://template/uri-secret/data, limit 7")
	if want := "read resource:" + redact.Digest("test://template/uri-secret/data") + ", limit " + redact.Digest("7"); got != want {
		t.Errorf("Redact = %q, want %q", got, want)
	}
	if got := redact.ValuesOf(nil).With().Redact("x /private/a.txt"); got != "x /private/a.txt" {
		t.Errorf("With() changed the text: %q", got)
	}
}

func ExampleArguments() {
	fmt.Println(redact.Arguments("role engineer may not read /private/a.txt", []byte(`{"path":"/private/a.txt"}`)))
	// Output: role engineer may not read [arg sha256:d49277853e7e]
}

func TestArgumentsDigest(t *testing.T) {
	// sha256("") is the well-known e3b0c442… value.
	if got := redact.ArgumentsDigest(nil); got != "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
		t.Errorf("ArgumentsDigest(nil) = %s", got)
	}
}

// items is arguments of n string values, "secret-000000" on.
func items(n int) string {
	var args strings.Builder
	args.WriteString(`{"items":[`)
	for i := range n {
		if i > 0 {
			args.WriteByte(',')
		}
		fmt.Fprintf(&args, `"secret-%06d"`, i)
	}
	args.WriteString(`]}`)
	return args.String()
}

// A text past MaxText is replaced whole, whatever it quotes; one within it
// is redacted value by value as before. (A reason quoting 1 MiB of
// arguments took minutes to redact value by value.)
func TestLongTextRedactedWhole(t *testing.T) {
	args := items(100_000)
	v := redact.ValuesOf([]byte(args))
	long := "unknown items: " + args
	got := v.Redact(long)
	if strings.Contains(got, "secret-") || !strings.HasPrefix(got, "[text of ") || !strings.Contains(got, "redacted whole") {
		t.Errorf("long text = %.120q", got)
	}
	short := "unknown item secret-000042, and 7 more"
	if got := redact.ValuesOf([]byte(items(100))).Redact(short); strings.Contains(got, "secret-000042") || !strings.Contains(got, "[arg sha256:") {
		t.Errorf("short text = %q", got)
	}
	few := redact.ValuesOf([]byte(`{"a":"secret-000042"}`))
	if got := few.Redact(strings.Repeat("x", redact.MaxText)); got != strings.Repeat("x", redact.MaxText) {
		t.Error("a text of MaxText bytes quoting nothing was changed")
	}
	// So many values that reading a text once for each is too much: the
	// text is replaced whole, however short.
	if got := v.Redact(strings.Repeat("y", 1000)); !strings.Contains(got, "redacted whole") {
		t.Errorf("1,000 bytes against 100,000 values = %.80q", got)
	}
	// One value of 1 MiB: its pieces are indexed once, and a text of many
	// words is redacted piece by piece, never whole.
	var prose strings.Builder
	for i := range 1 << 20 / 16 {
		fmt.Fprintf(&prose, "word%06d %s ", i, "text")
	}
	big := redact.ValuesOf([]byte(`{"content":"` + prose.String() + `"}`))
	reason := strings.Repeat("policy says the write is refused; ", 100) + "word000042 quoted"
	got = big.Redact(reason)
	if strings.Contains(got, "redacted whole") || strings.Contains(got, "word000042") || !strings.Contains(got, "policy says the write is refused") {
		t.Errorf("a reason of %d bytes against 1 MiB of value = %.200q", len(reason), got)
	}
}

// Arguments of more than MaxValues values (keys included) are not
// collected: every text is replaced whole, however short, and reading stops
// there. (1 MiB of ~130,000 short strings took 0.4 s per call to collect.)
func TestManyValuesRedactedWhole(t *testing.T) {
	const text = "role engineer may not read /private/secret-000042 or else"
	within := redact.KeysAndValuesOf([]byte(items(redact.MaxValues - 1))) // and the key "items"
	if got := within.Redact(text); strings.Contains(got, "redacted whole") || strings.Contains(got, "secret-000042") || !strings.Contains(got, "role engineer may not read ") {
		t.Errorf("%d values: %q", redact.MaxValues, got)
	}
	for _, args := range []string{items(redact.MaxValues), items(150_000), `{"a":[` + strings.Repeat("null,", redact.MaxValues) + `null]}`} {
		v := redact.KeysAndValuesOf([]byte(args))
		for _, text := range []string{text, "file:/public/a.txt", "allowed"} {
			if got := v.Redact(text); !strings.HasPrefix(got, "[text of ") || !strings.Contains(got, "redacted whole") {
				t.Errorf("%.40s… (%d bytes): %q = %q, want it whole", args, len(args), text, got)
			}
			if got := v.With("/private/x").RedactValues(text); !strings.Contains(got, "redacted whole") {
				t.Errorf("%.40s… (%d bytes) with a URI: %q = %q, want it whole", args, len(args), text, got)
			}
		}
	}
	// The work stops at the cap: 150,000 values cost what MaxValues+1 do
	// (counted in allocations, which do not depend on the machine).
	past, many := []byte(items(redact.MaxValues)), []byte(items(150_000))
	atCap := testing.AllocsPerRun(3, func() { redact.KeysAndValuesOf(past) })
	beyond := testing.AllocsPerRun(3, func() { redact.KeysAndValuesOf(many) })
	if beyond > 2*atCap {
		t.Errorf("collecting 150,000 values took %.0f allocations, %d values %.0f: reading did not stop at the cap", beyond, redact.MaxValues+1, atCap)
	}
}

// RedactValues, for a text made to be recorded, keeps the schema's words
// a value also holds (the location, the keyword); Redact would take them.
func TestRedactValuesKeepsWordsOfValues(t *testing.T) {
	v := redact.KeysAndValuesOf([]byte(`{"mode":"x","content":"This explains each mode. It does not satisfy enumerations."}`))
	const text = "invalid arguments at /mode: the value does not satisfy enum"
	if got := v.RedactValues(text); got != text {
		t.Errorf("RedactValues = %q", got)
	}
	if got := v.Redact(text); strings.Contains(got, "/mode") {
		t.Errorf("Redact = %q: a word of a value stayed", got)
	}
}

// A placeholder is never searched again: a value that occurs inside
// another value's digest leaves the digest whole. Overlapping occurrences
// are replaced together, leaving no part of either.
func TestRedactInOnePass(t *testing.T) {
	long := "abcdef-secret-value"
	d := redact.Digest(long)
	inside := d[len("[arg sha256:") : len("[arg sha256:")+4] // 4 hex of its digest
	v := redact.ValuesOf([]byte(`{"a":"` + long + `","b":"` + inside + `"}`))
	if got := v.Redact("read " + long); got != "read "+d {
		t.Errorf("Redact = %q, want %q", got, "read "+d)
	}
	v = redact.ValuesOf([]byte(`{"a":"hello-world","b":"world-again"}`))
	got := v.Redact("say hello-world-again now")
	if strings.Contains(got, "hello") || strings.Contains(got, "again") || got != "say "+redact.Digest("hello-world-again")+" now" {
		t.Errorf("overlapping values = %q", got)
	}
}

// Arguments redacts a key that reads as data also as a schema error's
// location quotes it (a JSON Pointer: "/" as "~1"); a name stays, so the
// location of an error at a property remains readable.
func TestArgumentsRedactsDataKeysInLocations(t *testing.T) {
	args := []byte(`{"/private/key-secret.txt":1,"limit":500}`)
	got := redact.Arguments("at /~1private~1key-secret.txt: the value does not satisfy false; at /limit: maximum", args)
	if strings.Contains(got, "key-secret") || !strings.HasPrefix(got, "at [arg sha256:") ||
		!strings.HasSuffix(got, ": the value does not satisfy false; at /limit: maximum") {
		t.Errorf("Arguments = %q: want the data key's location redacted, the rest kept", got)
	}
}
