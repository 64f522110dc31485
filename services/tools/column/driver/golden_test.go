package driver_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/sharedos/toolshare/services/tools/column/driver"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/ from the current rendering")

// golden compares got with the file at path (or writes it with -update).
func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update writes it)", err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := 0; i < len(gl) || i < len(wl); i++ {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Errorf("%s: line %d differs (review, then go test -update):\n got: %s\nwant: %s", path, i+1, g, w)
				return
			}
		}
	}
}

// catalogue is testdata/catalogue.json: files.read (a dot), clock (an
// outputSchema and annotations, which no vendor definition carries) and
// notes-append (a hyphen, a schema with $schema, anyOf, 1e400 and a big
// integer, its properties out of alphabetical order).
func catalogue(t *testing.T) []driver.Tool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "catalogue.json"))
	if err != nil {
		t.Fatal(err)
	}
	page, err := driver.ParseToolsPage(b)
	if err != nil {
		t.Fatal(err)
	}
	return page.Tools
}

func render(t *testing.T, v driver.Vendor) *driver.Catalogue {
	t.Helper()
	c, err := driver.NewCatalogue(v, catalogue(t))
	if err != nil {
		t.Fatalf("%s: %v", v, err)
	}
	return c
}

// TestDefinitionsGolden: each vendor's tool definitions of the catalogue,
// one per line, and the name mapping; every schema verbatim; and the errors
// of two catalogues whose names collide on the vendor's wire.
func TestDefinitionsGolden(t *testing.T) {
	tools := catalogue(t)
	for _, v := range driver.Vendors() {
		t.Run(string(v), func(t *testing.T) {
			c := render(t, v)
			var out bytes.Buffer
			defs := c.Definitions()
			if len(defs) != len(tools) {
				t.Fatalf("%d definitions for %d tools", len(defs), len(tools))
			}
			for i, d := range defs {
				if !json.Valid(d) {
					t.Errorf("definition %d is not JSON: %s", i, d)
				}
				if !bytes.Contains(d, tools[i].InputSchema) {
					t.Errorf("definition of %s does not carry its inputSchema verbatim: %s", tools[i].Name, d)
				}
				out.Write(d)
				out.WriteByte('\n')
			}
			if got := c.DefinitionsJSON(); !json.Valid(got) || !bytes.Equal(got, append(append([]byte("["), bytes.Join(bytesOf(defs), []byte(","))...), ']')) {
				t.Errorf("DefinitionsJSON is not the definitions as one array: %s", got)
			}
			out.WriteString("# names\n")
			for _, tl := range tools {
				name, ok := c.VendorName(tl.Name)
				back, ok2 := c.ToolName(name)
				if !ok || !ok2 || back != tl.Name {
					t.Errorf("%s → %q (%v) → %q (%v): not a bijection", tl.Name, name, ok, back, ok2)
				}
				fmt.Fprintf(&out, "%s -> %s\n", tl.Name, name)
			}
			// Names that cannot share one catalogue: the render fails, naming both.
			for _, pair := range [][]string{{"a.b", "a_b"}, {"files_read", "files.read"}} {
				_, err := driver.NewCatalogue(v, []driver.Tool{{Name: pair[0]}, {Name: pair[1]}})
				var ne *driver.NameError
				if !errors.As(err, &ne) {
					t.Errorf("%v: error %v, want a *NameError", pair, err)
				}
				fmt.Fprintf(&out, "# %s + %s\n%v\n", pair[0], pair[1], err)
			}
			golden(t, filepath.Join("testdata", string(v), "definitions.golden"), out.Bytes())
		})
	}
}

func bytesOf(rs []json.RawMessage) [][]byte {
	out := make([][]byte, len(rs))
	for i, r := range rs {
		out[i] = r
	}
	return out
}

// callCase is one labelled vendor item of testdata/calls/VENDOR.txt.
type callCase struct{ label, item string }

func callCases(t *testing.T, v driver.Vendor) []callCase {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "calls", string(v)+".txt"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines)%2 != 0 {
		t.Fatalf("calls/%s.txt: want pairs of '# label' and item lines", v)
	}
	var out []callCase
	for i := 0; i < len(lines); i += 2 {
		if !strings.HasPrefix(lines[i], "# ") {
			t.Fatalf("calls/%s.txt line %d: want '# label'", v, i+1)
		}
		out = append(out, callCase{label: lines[i][2:], item: lines[i+1]})
	}
	return out
}

// TestCallsGolden: each vendor call item's translation — the call id, the
// name as written, the tools/call name and the arguments' bytes — or the
// error, and for arguments that are not an object the answer the model
// gets. Arguments are checked byte-exact against the item here too: the
// very bytes of "input"/"arguments", or of the Responses string's content.
func TestCallsGolden(t *testing.T) {
	for _, v := range driver.Vendors() {
		t.Run(string(v), func(t *testing.T) {
			c := render(t, v)
			var out bytes.Buffer
			for _, cc := range callCases(t, v) {
				fmt.Fprintf(&out, "# %s\nin:     %s\n", cc.label, cc.item)
				call, err := c.ParseCall([]byte(cc.item))
				var ae *driver.ArgumentsError
				var se *driver.ShapeError
				switch {
				case errors.As(err, &ae):
					if !errors.Is(err, driver.ErrInvalidArguments) {
						t.Errorf("%s: *ArgumentsError is not ErrInvalidArguments", cc.label)
					}
					answer := c.RenderInvalidArguments(call, ae)
					if !json.Valid(answer) {
						t.Errorf("%s: answer is not JSON: %s", cc.label, answer)
					}
					fmt.Fprintf(&out, "error:  %v\nanswer: %s\n", err, answer)
				case errors.As(err, &se):
					fmt.Fprintf(&out, "error:  %v\n", err)
				case err != nil:
					t.Fatalf("%s: error of type %T: %v", cc.label, err, err)
				default:
					fmt.Fprintf(&out, "id:     %s\nname:   %s\ntool:   %s\nargs:   %s\n", call.ID, call.VendorName, call.Tool, call.Arguments)
					checkExact(t, v, cc, call)
				}
			}
			golden(t, filepath.Join("testdata", string(v), "calls.golden"), out.Bytes())
		})
	}
}

// checkExact: the arguments are the vendor's own bytes.
func checkExact(t *testing.T, v driver.Vendor, cc callCase, call driver.Call) {
	t.Helper()
	var fields map[string]json.RawMessage
	if err := json.Unmarshal([]byte(cc.item), &fields); err != nil {
		t.Fatal(err)
	}
	key := "arguments"
	if v == driver.Anthropic {
		key = "input"
	}
	raw, ok := fields[key]
	want := raw
	if v == driver.OpenAIResponses && ok {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatal(err)
		}
		want = json.RawMessage(s)
	}
	if !ok || string(want) == "null" || len(want) == 0 {
		want = json.RawMessage(`{}`)
	}
	if !bytes.Equal(call.Arguments, want) {
		t.Errorf("%s: arguments %s, want the item's bytes %s", cc.label, call.Arguments, want)
	}
}

// resultCall is the call the result fixtures answer.
var resultCall = driver.Call{ID: "call-1", VendorName: "files_read", Tool: "files.read"}

func results(t *testing.T) map[string]*mcp.CallToolResult {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "results", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no result fixtures: %v", err)
	}
	out := map[string]*mcp.CallToolResult{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		raw := json.RawMessage(b)
		res, err := mcp.ParseCallToolResult(&raw)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[strings.TrimSuffix(filepath.Base(f), ".json")] = res
	}
	return out
}

// TestResultsGolden: each MCP result fixture (success, denied with its
// outcome, image, structuredContent with and without text, audio /
// resource_link / embedded resources, a tool error without the SharedOS
// prefix, a failed handler, an empty text) rendered in each vendor's shape,
// with the Observation read from it.
func TestResultsGolden(t *testing.T) {
	res := results(t)
	names := make([]string, 0, len(res))
	for n := range res {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, v := range driver.Vendors() {
		t.Run(string(v), func(t *testing.T) {
			c := render(t, v)
			var out bytes.Buffer
			for _, n := range names {
				got := c.RenderResult(resultCall, res[n])
				if !json.Valid(got) {
					t.Errorf("%s: not JSON: %s", n, got)
				}
				obs, err := json.Marshal(driver.Observe(resultCall, res[n]))
				if err != nil {
					t.Fatal(err)
				}
				fmt.Fprintf(&out, "# %s\n%s\nobservation: %s\n", n, got, obs)
			}
			golden(t, filepath.Join("testdata", string(v), "results.golden"), out.Bytes())
		})
	}
}
