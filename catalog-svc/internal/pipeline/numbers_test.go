package pipeline_test

import (
	"context"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/outcome"
)

// numbersSchema holds numbers to a lower bound, a list of codes, a value
// that is not 0 and a list of integers.
var numbersSchema = `{"type":"object","properties":{"x":{"type":"number","exclusiveMinimum":0},` +
	`"code":{"enum":[` + enumOf(100) + `]},"nz":{"not":{"const":0}},"list":{"type":"array","items":{"type":"integer"}}},` +
	`"additionalProperties":false}`

func enumOf(n int) string {
	s := make([]string, n)
	for i := range s {
		s[i] = itoa(i)
	}
	return strings.Join(s, ",")
}

// A number a double cannot hold as what it is — so large a double reads
// it as infinite, so small it reads as 0 though it is not 0, or written
// with an exponent past three digits — is the model's invalid argument,
// refused while the arguments are decoded, named by its location, and
// never reaches the schema validator, authz-svc or the tool (attack run
// F2: the validator converts each number it checks to an exact big.Rat,
// 25 ms for one 1e-999999 — 1.66 s against a 100-integer enum, 5.25 s for
// 200 of them — and panicked on 1e-1000001 under exclusiveMinimum, which
// the harness was told was failed/internal "the tool may have run"; F3:
// 1e-400 passed "exclusiveMinimum": 0 and "not": {"const": 0} and reached
// the tool verbatim, where every double reader reads 0). Numbers a double
// holds pass as written, large integers of every digit included.
func TestNumbersADoubleCannotHoldAreRefused(t *testing.T) {
	forEachStore(t, options{}, func(t *testing.T, h *harness) {
		ctx := context.Background()
		files, _ := h.resolver.Resolve(ctx, "files.read")
		h.resolver.add(t, "test.numbers", numbersSchema, "read", "file:/public/numbers",
			files.Registration.GetHandler().GetTarget(), sharedosv1.ToolClass_TOOL_CLASS_MANAGED, 0)
		tiny200 := "[" + strings.TrimSuffix(strings.Repeat("1e-999999,", 200), ",") + "]"
		for i, c := range []struct{ tool, args, want string }{
			{"files.search", `{"query":"x","path":"/public","limit":1e-999999}`, "at /limit: a number whose exponent is beyond ±999"},
			{"test.numbers", `{"code":1e-999999}`, "at /code: a number whose exponent"},
			{"test.numbers", `{"list":` + tiny200 + `}`, "at /list/0: a number whose exponent"},
			{"test.numbers", `{"x":1e-1000001}`, "at /x: a number whose exponent"}, // the validator's panic
			{"test.numbers", `{"x":1e-400}`, "at /x: a number so close to 0 that a double reads it as 0"},
			{"test.numbers", `{"nz":-1e-400}`, "at /nz: a number so close to 0"},
			{"test.numbers", `{"x":1e400}`, "at /x: a number beyond a double's range"},
			{"test.numbers", `{"x":0}`, "at /x:"}, // the schema's own refusal, as before
		} {
			turn := "num" + itoa(i)
			res := h.call(turn, c.tool, c.args)
			expect(t, res, failed, outcome.InvalidArguments)
			if !strings.Contains(res.GetReason(), c.want) {
				t.Errorf("%.60s: reason %q, want %q", c.args, res.GetReason(), c.want)
			}
			if rows := h.records(turn); len(rows) != 1 || rows[0].Code != outcome.InvalidArguments || rows[0].ResolvedTool != c.tool {
				t.Errorf("%.60s: records %+v, want one failed/invalid_arguments", c.args, rows)
			}
		}
		if a, n := h.authz.calls.Load(), h.handler.calls.Load(); a != 0 || n != 0 {
			t.Fatalf("refused arguments reached authz-svc (%d) or the tool (%d)", a, n)
		}

		h.handler.mu.Lock()
		h.handler.answer = &sharedosv1.HandleResponse{ContentJson: []byte(`[{"type":"text","text":"ok"}]`)}
		h.handler.mu.Unlock()
		t.Cleanup(func() { h.handler.mu.Lock(); h.handler.answer = nil; h.handler.mu.Unlock() })
		taken := []string{
			`{"x":1e-320}`, // below the normal doubles, not 0 to any of them
			`{"x":4.9e-324,"nz":-0.5e-323,"code":99}`,
			`{"x":1.7976931348623157e308,"code":0e-999}`,
			`{"list":[` + strings.Repeat("9", 128) + `,9007199254740993,-1` + strings.Repeat("0", 100) + `e-50]}`,
		}
		for i, args := range taken {
			turn := "numok" + itoa(i)
			expect(t, h.call(turn, "test.numbers", args), succeeded, "")
			h.handler.mu.Lock()
			got := string(h.handler.lastArgs)
			h.handler.mu.Unlock()
			if got != args {
				t.Errorf("the tool got %s, want %s as sent", got, args)
			}
		}
	})
}

// A tool's structuredContent is held to the same numbers before its
// output schema checks it (attack run F2: an upstream's structuredContent
// of 400 numbers of 1e-999999 cost 6.7 s of the kernel's CPU per call; a
// number of a million digits costs a big.Rat more than a second): one a
// double cannot hold as what it is ends the attempt as any result outside
// the output schema does — failed/handler_error for a provider's,
// failed/upstream_unavailable for an upstream's — recorded so, and the
// content is not passed on. A number a double holds passes as written.
func TestStructuredNumbersADoubleCannotHoldAreRefused(t *testing.T) {
	forEachStore(t, options{}, func(t *testing.T, h *harness) {
		ctx := context.Background()
		files, _ := h.resolver.Resolve(ctx, "files.read")
		target := files.Registration.GetHandler().GetTarget()
		const outSchema = `{"type":"object","properties":{"n":{"type":"number","exclusiveMinimum":0},"list":{"type":"array","items":{"enum":[` +
			`0,1,2,3,4,5,6,7,8,9]}}},"additionalProperties":false}`
		compiled := compile(t, outSchema)
		for name, source := range map[string]string{"test.counted": "test", "ev.counted": "mcp:ev"} {
			h.resolver.add(t, name, sleepSchema, "read", "file:/public/counted", target, sharedosv1.ToolClass_TOOL_CLASS_MANAGED, 0)
			r, _ := h.resolver.Resolve(ctx, name)
			r.OutputSchema, r.Registration.Metadata.Source = compiled, source
		}
		tiny400 := "[" + strings.TrimSuffix(strings.Repeat("1e-999999,", 400), ",") + "]"
		n := 0
		call := func(tool, structured string) *sharedosv1.ToolResult {
			t.Helper()
			h.handler.mu.Lock()
			h.handler.answer = &sharedosv1.HandleResponse{ContentJson: []byte(`[{"type":"text","text":"counted"}]`),
				StructuredContentJson: []byte(structured)}
			h.handler.mu.Unlock()
			n++
			return h.call("out"+itoa(n), tool, `{}`)
		}
		t.Cleanup(func() { h.handler.mu.Lock(); h.handler.answer = nil; h.handler.mu.Unlock() })
		for tool, code := range map[string]string{"test.counted": outcome.HandlerError, "ev.counted": outcome.UpstreamUnavailable} {
			for structured, want := range map[string]string{
				`{"list":` + tiny400 + `}`:                 "a number whose exponent is beyond ±999",
				`{"n":1e-1000001}`:                         "a number whose exponent is beyond ±999", // the validator's panic
				`{"n":1e-400}`:                             "a number so close to 0 that a double reads it as 0",
				`{"n":1e400}`:                              "a number beyond a double's range",
				`{"n":1` + strings.Repeat("0", 1000) + `}`: "a number of 1001 characters; the limit is 128",
				`{"n":0}`:                                  "at /n: the value does not satisfy exclusiveMinimum", // as before
				`{"n":0.5,"x":{"y":[{"z":-1e-400}]}}`:      "a number so close to 0",                             // wherever it is
				// Deeper than the schema's validation work is bounded for
				// (review: a 66-deep answer under a 64-level chain to a
				// costly subschema took 1.27 s).
				`{"x":` + strings.Repeat(`{"a":`, 65) + `1` + strings.Repeat(`}`, 66): "nested deeper than 64 levels",
			} {
				res := call(tool, structured)
				expect(t, res, failed, code)
				if !strings.Contains(res.GetReason(), want) || res.GetContentJson() != nil || res.GetStructuredContentJson() != nil {
					t.Errorf("%s %.40s: reason %q (want %q); the harness got %s / %s", tool, structured, res.GetReason(), want,
						res.GetContentJson(), res.GetStructuredContentJson())
				}
				if rows := h.records("out" + itoa(n)); len(rows) != 1 || rows[0].Code != code || !strings.Contains(rows[0].Reason, want) {
					t.Errorf("%s %.40s: records %+v", tool, structured, rows)
				}
			}
			for _, structured := range []string{`{"n":1e-320}`, `{"n":4.9e-324,"list":[0e-999,9]}`, `{"n":` + strings.Repeat("9", 128) + `}`} {
				res := call(tool, structured)
				expect(t, res, succeeded, "")
				if string(res.GetStructuredContentJson()) != structured {
					t.Errorf("%s: passed on %s, want %s", tool, res.GetStructuredContentJson(), structured)
				}
			}
		}
	})
}

// compile is schema compiled as the catalogue compiles a tool's.
func compile(t *testing.T, schema string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("mem://out", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("mem://out")
	if err != nil {
		t.Fatal(err)
	}
	return s
}
