package regfile_test

import (
	"strings"
	"testing"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/tools/regfile"
)

const yamlList = `
- name: files.read
  description: Read a file.
  inputSchema:
    type: object
    properties: {path: {type: string}}
    required: [path]
  annotations: {readOnlyHint: true}
  metadata: {namespace: files, source: builtin}
  requirement: {action: read, resource: "file:{path}"}
  handler: {target: "127.0.0.1:7404", timeout: 5s}
- name: files.write
  inputSchema: {type: object}
  metadata: {namespace: files, source: builtin}
  class: managed
`

func TestParseYAMLList(t *testing.T) {
	regs, err := regfile.Parse([]byte(yamlList), false)
	if err != nil {
		t.Fatal(err)
	}
	if len(regs) != 2 {
		t.Fatalf("got %d registrations", len(regs))
	}
	p, err := regs[0].ToProto()
	if err != nil {
		t.Fatal(err)
	}
	if p.GetClass() != sharedosv1.ToolClass_TOOL_CLASS_MANAGED || p.GetRequirement().GetResource() != "file:{path}" ||
		p.GetHandler().GetTimeout().AsDuration().Seconds() != 5 || p.GetMetadata().GetNamespace() != "files" {
		t.Fatalf("unexpected proto %v", p)
	}
	if p.GetRequirement().GetPathCleaning() != sharedosv1.PathCleaning_PATH_CLEANING_POSIX {
		t.Fatal("path cleaning must default to POSIX")
	}
}

func TestJSONKeepsSchemaBytesVerbatim(t *testing.T) {
	in := `{"name":"x.y","inputSchema":{"type":"object","properties":{"b":{},"a":{}}}}`
	regs, err := regfile.Parse([]byte(in), true)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := regs[0].ToProto()
	if string(p.GetInputSchemaJson()) != `{"type":"object","properties":{"b":{},"a":{}}}` {
		t.Fatalf("schema rewritten: %s", p.GetInputSchemaJson())
	}
}

func TestRejects(t *testing.T) {
	cases := map[string]struct {
		in      string
		isJSON  bool
		wantSub string
	}{
		"unknown top-level key": {`{"name":"a.b","grants":["x"]}`, true, `unknown field "grants"`},
		"unknown nested key":    {"name: a.b\nrequirement: {action: read, scope: x}\n", false, `unknown field "scope"`},
		"bad class":             {`{"name":"a.b","class":"shared"}`, true, `class "shared"`},
		"bad timeout":           {`{"name":"a.b","handler":{"target":"x","timeout":"soon"}}`, true, `handler.timeout`},
		"empty":                 {"  ", true, "empty"},
		"trailing":              {`{"name":"a.b"} {"name":"c.d"}`, true, "trailing"},
		"trailing brace":        {`{"name":"a.b"}}`, true, "trailing"},
		"trailing bracket":      {`{"name":"a.b"}]`, true, "trailing"},
		// A key given twice: a reader sees one value, the decoder would
		// keep the other.
		"key twice, YAML": {"name: a.b\nrequirement: {action: read, resource: \"file:{path}\"}\nrequirement: {action: call}\n", false, `key "requirement" is given twice`},
		// Read as YAML 1.1 (the JSON conversion does): y and yes are one key.
		"key twice as YAML 1.1 reads it": {"name: a.b\ninputSchema: {type: object, properties: {y: {type: number}, yes: {type: string}}}\n", false, "given twice"},
		"number key twice":               {"name: a.b\nannotations: {1: a, 0x1: b}\n", false, "given twice"},
		"key twice, JSON":                {`{"name":"a.b","requirement":{"action":"read"},"requirement":{"action":"call"}}`, true, "twice"},
		"nested key twice, JSON":         {`{"name":"a.b","requirement":{"action":"read","action":"call"}}`, true, "twice"},
		// A second document is refused, never dropped.
		"two documents":          {"name: a.b\n---\nname: c.d\n", false, "more than one YAML document"},
		"an empty one, then one": {"---\n---\nname: c.d\n", false, "more than one YAML document"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			regs, err := regfile.Parse([]byte(c.in), c.isJSON)
			if err == nil {
				_, err = regs[0].ToProto()
			}
			if err == nil || !strings.Contains(err.Error(), c.wantSub) {
				t.Fatalf("err = %v, want containing %q", err, c.wantSub)
			}
		})
	}
}

func TestRoundTrip(t *testing.T) {
	regs, err := regfile.Parse([]byte(yamlList), false)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := regs[0].ToProto()
	back := regfile.FromProto(p)
	if back.Name != "files.read" || back.Handler.Timeout != "5s" || back.Requirement.Action != "read" || back.Class != "managed" {
		t.Fatalf("round trip lost data: %+v", back)
	}
}

// TestOpenArguments: requirement.openArguments reaches the registration and
// comes back (issue 17, item 1's opt-out).
func TestOpenArguments(t *testing.T) {
	regs, err := regfile.Parse([]byte(`{"name":"x.y","inputSchema":{"type":"object"},"requirement":{"action":"read","resource":"file:{p}","openArguments":true},"handler":{"target":"127.0.0.1:1"}}`), true)
	if err != nil {
		t.Fatal(err)
	}
	p, err := regs[0].ToProto()
	if err != nil || !p.GetRequirement().GetOpenArguments() {
		t.Fatalf("ToProto = %v, %v; want open_arguments", p.GetRequirement(), err)
	}
	if back := regfile.FromProto(p); !back.Requirement.OpenArguments {
		t.Fatalf("FromProto lost openArguments: %+v", back.Requirement)
	}
}

// One document, whether "---" opens or closes it, is read as before.
func TestOneDocumentWithMarkers(t *testing.T) {
	for _, in := range []string{"---\nname: a.b\n", "name: a.b\n---\n", "# only\nname: a.b\n...\n"} {
		regs, err := regfile.Parse([]byte(in), false)
		if err != nil || len(regs) != 1 || regs[0].Name != "a.b" {
			t.Errorf("Parse(%q) = %+v, %v", in, regs, err)
		}
	}
}

// A key that overrides one a merge brought in is YAML, not a key given
// twice: files.stat takes files.read's description and its own name.
func TestYAMLMergeOverrides(t *testing.T) {
	regs, err := regfile.Parse([]byte("- &base {name: files.read, description: Reads.}\n- <<: *base\n  name: files.stat\n"), false)
	if err != nil {
		t.Fatal(err)
	}
	if len(regs) != 2 || regs[1].Name != "files.stat" || regs[1].Description != "Reads." {
		t.Fatalf("registrations %+v", regs)
	}
	// Two merges in one mapping: both merged.
	regs, err = regfile.Parse([]byte("- &a {name: files.read}\n- &b {description: Reads.}\n- <<: *a\n  <<: *b\n  name: files.stat\n"), false)
	if err != nil {
		t.Fatal(err)
	}
	if len(regs) != 3 || regs[2].Name != "files.stat" || regs[2].Description != "Reads." {
		t.Fatalf("two merges: registrations %+v", regs)
	}
}
