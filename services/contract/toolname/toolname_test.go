package toolname_test

import (
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/sharedos/toolshare/services/contract/internal/specvectors"

	"github.com/sharedos/toolshare/services/contract/toolname"
)

type vectors struct {
	Valid   []string `json:"valid"`
	Invalid []struct {
		Name string `json:"name"`
		Why  string `json:"why"`
	} `json:"invalid"`
}

func loadVectors(t testing.TB) vectors {
	t.Helper()
	var v vectors
	if err := json.Unmarshal(specvectors.Read(t, "toolname-vectors.json"), &v); err != nil {
		t.Fatalf("decode toolname vectors: %v", err)
	}
	if len(v.Valid) == 0 || len(v.Invalid) == 0 {
		t.Fatalf("toolname vectors are empty: %d valid, %d invalid", len(v.Valid), len(v.Invalid))
	}
	return v
}

func TestValidateVectors(t *testing.T) {
	v := loadVectors(t)
	for _, name := range v.Valid {
		if err := toolname.Validate(name); err != nil {
			t.Errorf("Validate(%q) = %v, want nil", name, err)
		}
	}
	for _, c := range v.Invalid {
		err := toolname.Validate(c.Name)
		if err == nil {
			t.Errorf("Validate(%q) accepted a name the spec rejects (%s)", c.Name, c.Why)
			continue
		}
		var te *toolname.Error
		if !errors.As(err, &te) || te.Field != "name" || te.Rule != toolname.RuleToolName {
			t.Errorf("Validate(%q) = %#v, want *Error{Field:name, Rule:ToolNameSchema}", c.Name, err)
		}
		if !errors.Is(err, toolname.ErrInvalid) {
			t.Errorf("Validate(%q) error does not match ErrInvalid", c.Name)
		}
	}
}

func TestValidateDetail(t *testing.T) {
	cases := []struct{ name, want string }{
		{"", "name: violates ToolNameSchema: empty; must be 1–128 characters of [A-Za-z0-9_.-]"},
		{"files read", "name: violates ToolNameSchema: character U+0020 at byte 5 is not in [A-Za-z0-9_.-]"},
		{strings.Repeat("x", 129), "name: violates ToolNameSchema: length 129 exceeds 128"},
		{"fichiers.lïre", "name: violates ToolNameSchema: character U+00EF at byte 10 is not in [A-Za-z0-9_.-]"},
		{"files.read\u200b", "name: violates ToolNameSchema: character U+200B at byte 10 is not in [A-Za-z0-9_.-]"},
		{"💥", "name: violates ToolNameSchema: character U+1F4A5 at byte 0 is not in [A-Za-z0-9_.-]"},
		{"ab\xffc", "name: violates ToolNameSchema: byte 0xFF at byte 2 is not valid UTF-8 and not in [A-Za-z0-9_.-]"},
		// A bad character is reported even past the length limit.
		{strings.Repeat("x", 200) + "/", "name: violates ToolNameSchema: character U+002F at byte 200 is not in [A-Za-z0-9_.-]"},
	}
	for _, c := range cases {
		err := toolname.Validate(c.name)
		if err == nil || err.Error() != c.want {
			t.Errorf("Validate(%q) = %v, want %q", c.name, err, c.want)
		}
	}
	err := toolname.ValidateField("tool", "a b")
	if err == nil || !strings.HasPrefix(err.Error(), "tool: violates ToolNameSchema: ") {
		t.Errorf("ValidateField names the wrong field: %v", err)
	}
}

func TestValidateLengthBoundary(t *testing.T) {
	if err := toolname.Validate(strings.Repeat("a", toolname.MaxLen)); err != nil {
		t.Errorf("128 characters rejected: %v", err)
	}
	if err := toolname.Validate(strings.Repeat("a", toolname.MaxLen+1)); err == nil {
		t.Error("129 characters accepted")
	}
}

// A namespace is what Parse can return as one, with room for a local name:
// every accepted namespace qualifies a name ToolNameSchema accepts, and every
// dotted name of the spec's vectors has one.
func TestValidateNamespace(t *testing.T) {
	valid := []string{"fs", "a", "A-Z_0-9", "-", strings.Repeat("n", toolname.MaxNamespaceLen)}
	for _, v := range loadVectors(t).Valid {
		if ns, _, dotted := strings.Cut(v, "."); dotted {
			valid = append(valid, ns)
		}
	}
	for _, ns := range valid {
		if err := toolname.ValidateNamespaceField("namespace", ns); err != nil {
			t.Errorf("ValidateNamespaceField(%q) = %v", ns, err)
		}
		if q, err := toolname.Parse(ns + ".x"); err != nil || q.Namespace != ns {
			t.Errorf("Parse(%q) = %+v, %v: the namespace %q qualifies no tool name", ns+".x", q, err, ns)
		}
	}
	invalid := map[string]string{
		"":         "namespace: violates NamespaceSchema: empty; must be 1–126 characters of [A-Za-z0-9_-]",
		"a.b":      "namespace: violates NamespaceSchema: character U+002E at byte 1 is not in [A-Za-z0-9_-]: a namespace is the tool names' first segment, which ends at the first '.'",
		"a/b":      "namespace: violates NamespaceSchema: character U+002F at byte 1 is not in [A-Za-z0-9_-]",
		"x:y":      "namespace: violates NamespaceSchema: character U+003A at byte 1 is not in [A-Za-z0-9_-]",
		" fs":      "namespace: violates NamespaceSchema: character U+0020 at byte 0 is not in [A-Za-z0-9_-]",
		"fs\n":     "namespace: violates NamespaceSchema: character U+000A at byte 2 is not in [A-Za-z0-9_-]",
		"fs\x00":   "namespace: violates NamespaceSchema: character U+0000 at byte 2 is not in [A-Za-z0-9_-]",
		"fïchiers": "namespace: violates NamespaceSchema: character U+00EF at byte 1 is not in [A-Za-z0-9_-]",
		strings.Repeat("n", toolname.MaxNamespaceLen+1): "namespace: violates NamespaceSchema: length 127 exceeds 126 (a tool name, namespace.tool, is at most 128)",
	}
	for ns, want := range invalid {
		err := toolname.ValidateNamespaceField("namespace", ns)
		if err == nil || err.Error() != want {
			t.Errorf("ValidateNamespaceField(%q) = %v, want %q", ns, err, want)
		}
		var te *toolname.Error
		if !errors.As(err, &te) || te.Rule != toolname.RuleNamespace || !errors.Is(err, toolname.ErrInvalid) {
			t.Errorf("ValidateNamespaceField(%q) is not a NamespaceSchema *Error: %#v", ns, err)
		}
	}
}

func TestValidateIdentifier(t *testing.T) {
	valid := []string{
		"t",
		"0190d7f0-6f3a-7c1e-9b2a-5d1c4e8f9a01",
		"user:alice@example.com",
		"spiffe://cluster.local/ns/tools/sa/files",
		"call_01J9~!#$%^&*()[]{}<>?=+|;'\",`",
		strings.Repeat("i", toolname.MaxIdentifierLen),
	}
	for _, id := range valid {
		if err := toolname.ValidateIdentifier(id); err != nil {
			t.Errorf("ValidateIdentifier(%q) = %v", id, err)
		}
	}
	invalid := map[string]string{
		"":         "identifier: violates IdentifierSchema: empty; must be 1–256 bytes of [\\x21-\\x7E]",
		"turn 1":   "identifier: violates IdentifierSchema: character U+0020 at byte 4 is not in [\\x21-\\x7E]",
		"turn\t1":  "identifier: violates IdentifierSchema: character U+0009 at byte 4 is not in [\\x21-\\x7E]",
		"turn\x7f": "identifier: violates IdentifierSchema: character U+007F at byte 4 is not in [\\x21-\\x7E]",
		"tür":      "identifier: violates IdentifierSchema: character U+00FC at byte 1 is not in [\\x21-\\x7E]",
		strings.Repeat("i", toolname.MaxIdentifierLen+1): "identifier: violates IdentifierSchema: length 257 bytes exceeds 256",
	}
	for id, want := range invalid {
		err := toolname.ValidateIdentifier(id)
		if err == nil || err.Error() != want {
			t.Errorf("ValidateIdentifier(%q) = %v, want %q", id, err, want)
		}
		var te *toolname.Error
		if !errors.As(err, &te) || te.Rule != toolname.RuleIdentifier {
			t.Errorf("ValidateIdentifier(%q) is not an IdentifierSchema *Error: %#v", id, err)
		}
	}
	err := toolname.ValidateIdentifierField("turnId", "")
	if err == nil || !strings.HasPrefix(err.Error(), "turnId: violates IdentifierSchema") {
		t.Errorf("ValidateIdentifierField names the wrong field: %v", err)
	}
}

// The two rules differ on purpose: identifiers carry ':' '/' '@', tool
// names do not, and a 200-byte identifier is fine where a tool name is not.
func TestRulesDiffer(t *testing.T) {
	for _, s := range []string{"user:alice", "a/b", "x@y", strings.Repeat("a", 200)} {
		if toolname.ValidateIdentifier(s) != nil || toolname.Validate(s) == nil {
			t.Errorf("%q: want a valid identifier and an invalid tool name", s)
		}
	}
}

func TestParse(t *testing.T) {
	cases := []struct {
		name      string
		ns, local string
	}{
		{"github.search", "github", "search"},
		{"notion.search", "notion", "search"},
		{"files.read.v2", "files", "read.v2"},
		{"files_read", "", "files_read"},
		{"mcp__sharedos__files_read", "", "mcp__sharedos__files_read"},
		{"a..b", "a", ".b"},
	}
	for _, c := range cases {
		q, err := toolname.Parse(c.name)
		if err != nil {
			t.Errorf("Parse(%q): %v", c.name, err)
			continue
		}
		if q.Namespace != c.ns || q.Local != c.local {
			t.Errorf("Parse(%q) = %+v, want {%q %q}", c.name, q, c.ns, c.local)
		}
		if q.String() != c.name {
			t.Errorf("Parse(%q).String() = %q", c.name, q.String())
		}
	}
	bad := map[string]string{
		"files read": "name: violates ToolNameSchema: character U+0020 at byte 5 is not in [A-Za-z0-9_.-]",
		".search":    "name: violates QualifiedToolName: leading '.' leaves the namespace empty",
		"github.":    "name: violates QualifiedToolName: trailing '.' leaves the local name empty",
		".":          "name: violates QualifiedToolName: leading '.' leaves the namespace empty",
	}
	for name, want := range bad {
		if _, err := toolname.Parse(name); err == nil || err.Error() != want {
			t.Errorf("Parse(%q) = %v, want %q", name, err, want)
		}
	}
}

func TestCollisionKey(t *testing.T) {
	cases := map[string]string{
		"files.read":     "files_read",
		"files-read":     "files_read",
		"files_read":     "files_read",
		"v1.2.3-beta_4":  "v1_2_3_beta_4",
		"A-Z_0.9":        "A_Z_0_9",
		"plain":          "plain",
		"":               "",
		"lïre":           "l_re",
		"a b":            "a_b",
		"\xff":           "_",
		"💥":              "_",
		"github.search":  "github_search",
		"notion.search":  "notion_search",
		"mcp__a__b":      "mcp__a__b",
		"files.read\x00": "files_read_",
	}
	for in, want := range cases {
		if got := toolname.CollisionKey(in); got != want {
			t.Errorf("CollisionKey(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestFindCollision(t *testing.T) {
	c, ok := toolname.FindCollision([]string{"github.search", "files.read", "notion.search", "files_read"})
	if !ok || c.Key != "files_read" || c.First != "files.read" || c.Second != "files_read" {
		t.Fatalf("FindCollision = %+v, %v", c, ok)
	}
	if !strings.Contains(c.Error(), `"files.read" and "files_read"`) {
		t.Errorf("collision message: %s", c.Error())
	}
	if c, ok := toolname.FindCollision([]string{"github.search", "notion.search", "github.search"}); ok {
		t.Errorf("distinct keys (and a repeated identical name) reported as collision: %+v", c)
	}
}

var (
	oracle           = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)
	identifierOracle = regexp.MustCompile(`^[\x21-\x7E]{1,256}$`)
)

func FuzzValidate(f *testing.F) {
	v := loadVectors(f)
	for _, n := range v.Valid {
		f.Add(n)
	}
	for _, c := range v.Invalid {
		f.Add(c.Name)
	}
	f.Add(strings.Repeat("é", 64))
	f.Add("user:alice@example.com")
	f.Add(strings.Repeat("~", 257))
	f.Fuzz(func(t *testing.T, name string) {
		if want, err := identifierOracle.MatchString(name), toolname.ValidateIdentifier(name); want != (err == nil) {
			t.Fatalf("ValidateIdentifier(%q) = %v, oracle says valid=%v", name, err, want)
		}
		err := toolname.Validate(name)
		if want := oracle.MatchString(name); want != (err == nil) {
			t.Fatalf("Validate(%q) = %v, oracle says valid=%v", name, err, want)
		}
		if err != nil {
			var te *toolname.Error
			if !errors.As(err, &te) || te.Field != "name" || te.Rule != toolname.RuleToolName || te.Detail == "" {
				t.Fatalf("Validate(%q) error %#v does not name field and rule", name, err)
			}
			return
		}
		key := toolname.CollisionKey(name)
		if len(key) != len(name) || strings.ContainsAny(key, ".-") || toolname.Validate(key) != nil {
			t.Fatalf("CollisionKey(%q) = %q is not a same-length valid name without '.' or '-'", name, key)
		}
		q, perr := toolname.Parse(name)
		if perr == nil && q.String() != name {
			t.Fatalf("Parse(%q) does not round-trip: %+v", name, q)
		}
		if perr != nil && !strings.HasPrefix(name, ".") && !strings.HasSuffix(name, ".") {
			t.Fatalf("Parse(%q) refused a valid name without an empty segment: %v", name, perr)
		}
	})
}
