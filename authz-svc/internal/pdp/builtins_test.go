package pdp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
)

// policyAllowingIf is a policy whose decision allows when cond holds.
func policyAllowingIf(cond string) string {
	return "package sharedos.authz\n\nimport rego.v1\n\ndecision := {\"allow\": allowed, \"reason\": \"\"}\n\ndefault allowed := false\n\nallowed if " + cond + "\n"
}

// loadPolicy reads and prepares files as a policy directory.
func loadPolicy(t *testing.T, files map[string]string) (*snapshot, error) {
	t.Helper()
	fs, err := readPolicyDir(writeTree(t, files))
	if err != nil {
		return nil, err
	}
	return prepare(context.Background(), fs)
}

// A policy decides on its input and data alone: one that calls a built-in
// able to reach the network, the host's files or the process — or any
// other OPA marks nondeterministic but the clock — does not load, and the
// load error names the built-in. json.match_schema and json.verify_schema
// fetched a schema's $ref over HTTP (with a call's argument in the URL)
// and read file:// refs (a decision that told whether a file exists);
// the server here counts every request: none may reach it, at load or at
// evaluation.
func TestPoliciesCannotReachTheNetworkOrTheProcess(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		_, _ = w.Write([]byte(`{"type": "object"}`))
	}))
	defer srv.Close()
	schemaFile := filepath.Join(t.TempDir(), "s.json")
	if err := os.WriteFile(schemaFile, []byte(`{"type": "object"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	remoteRef := `{"$ref": sprintf("` + srv.URL + `/s.json?leak=%v", [input.arguments.path])}`
	fileRef := `{"$ref": "file://` + schemaFile + `"}`
	for _, c := range []struct{ builtin, cond string }{
		{"http.send", `http.send({"method": "GET", "url": sprintf("` + srv.URL + `/?p=%v", [input.arguments.path])}).status_code == 200`},
		{"net.lookup_ip_addr", `count(net.lookup_ip_addr("db.example.internal")) > 0`},
		{"opa.runtime", `opa.runtime().env.SHAREDOS_DATABASE_URL != ""`},
		{"json.match_schema", `json.match_schema(input.arguments, ` + remoteRef + `)[0]`},
		{"json.match_schema", `json.match_schema(input.arguments, ` + fileRef + `)[0]`},
		{"json.verify_schema", `json.verify_schema(` + remoteRef + `)[0]`},
		{"json.verify_schema", `json.verify_schema(` + fileRef + `)[0]`},
		{"rand.intn", `rand.intn("x", 2) == 0`},
		{"uuid.rfc4122", `uuid.rfc4122("x") != ""`},
		{"io.jwt.encode_sign", `io.jwt.encode_sign({"alg": "HS256"}, {}, {"kty": "oct", "k": "c2VjcmV0"}) != ""`},
		{"io.jwt.decode_verify", `io.jwt.decode_verify(input.arguments.token, {"secret": "s"})[0]`},
	} {
		snap, err := loadPolicy(t, map[string]string{"p.rego": policyAllowingIf(c.cond)})
		want := "p.rego:9: built-in " + c.builtin + " is refused: "
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: load error %v, want one containing %q", c.cond, err, want)
		}
		if snap != nil {
			args, _ := ParseObject([]byte(`{"path": "/private/secret.txt", "token": "x"}`))
			_, _ = evalOne(context.Background(), snap, inputValue(contextTerm(Context{}), toolTerm(Tool{}), "read", "", args))
		}
	}
	// A schema in a rule's METADATA is not read (annotations are not
	// processed): its $ref reaches nothing either.
	annotated := "# METADATA\n# schemas:\n#   - input: {\"$ref\": \"" + srv.URL + "/annotation.json\"}\npackage sharedos.authz\n\nimport rego.v1\n\ndecision := {\"allow\": false, \"reason\": \"\"}\n"
	if _, err := loadPolicy(t, map[string]string{"p.rego": annotated}); err != nil {
		t.Errorf("a policy with a schema annotation: %v", err)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the policies reached the test server %d times", n)
	}

	// Pure built-ins, the clock, and a policy's own function named like a
	// refused built-in still load.
	for name, files := range map[string]map[string]string{
		"pure":  {"p.rego": policyAllowingIf(`net.cidr_contains("10.0.0.0/8", "10.1.2.3")`)},
		"clock": {"p.rego": policyAllowingIf(`time.now_ns() > 0`)},
		"own function": {
			"p.rego":   strings.Replace(policyAllowingIf(`json.match_schema(input.arguments, {})`), "import rego.v1\n", "import rego.v1\n\nimport data.lib.json\n", 1),
			"lib.rego": "package lib.json\n\nimport rego.v1\n\nmatch_schema(_, _) := true\n",
		},
	} {
		if _, err := loadPolicy(t, files); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// Every built-in OPA marks nondeterministic is refused but the admitted
// ones, and the capabilities hold none of them and allow no host: an OPA
// upgrade that adds such a built-in refuses it without a change here.
func TestRefusedBuiltinsAreEveryNondeterministicOne(t *testing.T) {
	known := map[string]*ast.Builtin{}
	for _, b := range ast.CapabilitiesForThisVersion().Builtins {
		known[b.Name] = b
		if b.Nondeterministic && admitted[b.Name] == "" && refusedBuiltins[b.Name] == "" {
			t.Errorf("nondeterministic built-in %s is not refused", b.Name)
		}
	}
	for name := range admitted {
		if b := known[name]; b == nil || refusedBuiltins[name] != "" {
			t.Errorf("admitted built-in %s is not OPA's or is refused", name)
		}
	}
	for name := range refusedWhy {
		if known[name] == nil {
			t.Errorf("refused built-in %s is not OPA's (misspelt?)", name)
		}
	}
	for _, b := range capabilities.Builtins {
		if refusedBuiltins[b.Name] != "" {
			t.Errorf("capabilities hold refused built-in %s", b.Name)
		}
	}
	if capabilities.AllowNet == nil || len(capabilities.AllowNet) != 0 {
		t.Errorf("AllowNet = %#v, want an empty list (nil allows every host)", capabilities.AllowNet)
	}
}
