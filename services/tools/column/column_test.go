package column_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sharedos/toolshare/services/tools/column"
	"github.com/sharedos/toolshare/services/tools/opsjson"
)

func TestExampleManifestAndHostConfig(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "deploy", "columns")
	m, err := column.ReadManifest(filepath.Join(dir, "demo-manifest.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if m.Context.GetPrincipal() != "alice" || m.Context.GetRoles()[0] != "engineer" || m.Policy.GetMode().String() != "POLICY_MODE_STRICT" ||
		len(m.Script) != 2 || string(m.Script[0].Arguments) != `{"path":"/public/a.txt"}` || len(m.Attempts) != 2 ||
		m.Attempts[0].Expected != "succeeded" || m.Attempts[1].Expected != "denied" || m.Prompt == "" {
		t.Fatalf("manifest = %+v", m)
	}
	h, err := column.ReadHostConfig(filepath.Join(dir, "host.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range column.Harnesses[column.KindScripted] {
		if _, err := h.For(column.KindScripted, name); err != nil {
			t.Errorf("scripted %s: %v", name, err)
		}
	}
}

// A bad manifest names the field and the rule.
func TestManifestErrors(t *testing.T) {
	const good = `context: {principal: alice}
toolPolicy: {mode: permissive}
script: [{id: c1, tool: files.read, arguments: '{"path":"/a"}'}]
attempts: [{tool: files.read, resource: /a, expected: succeeded, call: c1}]
`
	if _, err := column.ParseManifest([]byte(good)); err != nil {
		t.Fatalf("good manifest: %v", err)
	}
	for want, text := range map[string]string{
		"context.principal: required":                               strings.Replace(good, "principal: alice", "tenant: acme", 1),
		"toolPolicy: mode must be strict":                           strings.Replace(good, "permissive", "lenient", 1),
		"script[0].arguments: must be a JSON object":                strings.Replace(good, `'{"path":"/a"}'`, `'[1]'`, 1),
		"attempts[0].expected: must be succeeded, denied or failed": strings.Replace(good, "expected: succeeded", "expected: ok", 1),
		`attempts[0].call: "c2" is not a script call's id`:          strings.Replace(good, "call: c1", "call: c2", 1),
		"attempts: at least one":                                    strings.Split(good, "attempts:")[0],
		`unknown field "promt"`:                                     good + "promt: hi\n",
	} {
		if _, err := column.ParseManifest([]byte(text)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want %q, got %v", want, err)
		}
	}
}

// An attempt is exercised only by a call the column made, matched to its
// record; one it did not make is not_exercised, never made up.
func TestGrade(t *testing.T) {
	attempts := []column.Attempt{
		{Tool: "files.read", Resource: "/public/a.txt", Expected: "succeeded"},
		{Tool: "files.read", Resource: "/private/a.txt", Expected: "denied"},
		{Tool: "files.search", Resource: "a", Expected: "succeeded"},
	}
	calls := []column.Match{
		{CallID: "c1", Tool: "files.read", Arguments: json.RawMessage(`{"path":"/private/a.txt"}`)},
		{CallID: "c2", Tool: "files.read", Arguments: json.RawMessage(`{"path": "/public/a.txt", "x": [1]}`)},
		{CallID: "c3", Tool: "files.search", Arguments: json.RawMessage(`{"q":"a"}`)}, // no record of it
	}
	ops := []opsjson.Operation{
		{CallID: "c1", Tool: "files.read", Status: "denied", Code: "permission_denied"},
		{CallID: "c2", Tool: "files.read", Status: "succeeded"},
	}
	g := column.Grade(attempts, calls, ops, false)
	if g[0].Grade != column.Exercised || g[0].CallID != "c2" || g[0].Observed.Status != "succeeded" ||
		g[1].Grade != column.Exercised || g[1].CallID != "c1" || g[1].Observed.Code != "permission_denied" ||
		g[2].Grade != column.NotExercised || g[2].Observed != nil {
		t.Fatalf("grades = %+v", g)
	}
	if c := column.CountOf(ops); c != (column.Counts{Denied: 1, Succeeded: 1}) {
		t.Errorf("counts = %+v", c)
	}

	// A scripted attempt is matched by the script call that makes it, and
	// only to a record of its own tool.
	scripted := []column.Attempt{{Tool: "files.read", Resource: "/public/a.txt", Expected: "succeeded", Call: "s2"}}
	byScript := []column.Match{
		{Ref: "s1", CallID: "c2", Tool: "files.read", Arguments: json.RawMessage(`{"path":"/public/a.txt"}`)},
		{Ref: "s2", CallID: "c1", Tool: "files.read", Arguments: json.RawMessage(`{"path":"/public/a.txt"}`)},
	}
	if g := column.Grade(scripted, byScript, ops, true); g[0].CallID != "c1" || g[0].Observed.Status != "denied" {
		t.Errorf("scripted grade = %+v, want the record of call s2 (c1)", g[0])
	}
	other := []opsjson.Operation{{CallID: "c1", Tool: "files.write", Status: "succeeded"}}
	if g := column.Grade(scripted, byScript, other, true); g[0].Grade != column.NotExercised {
		t.Errorf("a record of another tool graded %+v", g[0])
	}
}

func TestCompareRefusesOtherToolSets(t *testing.T) {
	a := &column.Report{Kind: "scripted", Harness: "anthropic", SystemIdentity: opsjson.SystemIdentity{CatalogHash: "h1"},
		Tools: map[string]string{"files.read": "d1", "files.search": "d2"}}
	b := &column.Report{Kind: "scripted", Harness: "pi", SystemIdentity: opsjson.SystemIdentity{CatalogHash: "h2"},
		Tools: map[string]string{"files.read": "d9"}}
	_, err := column.Compare([]string{"a.json", "b.json"}, []*column.Report{a, b})
	if err == nil || !strings.Contains(err.Error(), "not given the same tool set") ||
		!strings.Contains(err.Error(), "files.read differs, files.search only in the first") {
		t.Fatalf("Compare = %v", err)
	}
	b.SystemIdentity.CatalogHash, b.Tools = "h1", a.Tools
	rows, err := column.Compare([]string{"a.json", "b.json"}, []*column.Report{a, b})
	if err != nil || len(rows) != 2 || !strings.Contains(rows[0][4], "2:b.json (scripted pi)") {
		t.Fatalf("Compare = %v, %v", rows, err)
	}
}

func TestReportNeverOverwritten(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.json")
	if err := column.WriteReport(path, &column.Report{Kind: "scripted"}); err != nil {
		t.Fatal(err)
	}
	if err := column.WriteReport(path, &column.Report{Kind: "mcp"}); !os.IsExist(err) {
		t.Fatalf("second write = %v, want exists", err)
	}
}
