package column

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
)

// recordOf finds the record an answer names, in a JSON body or in any
// event of an event stream, and only in the answer to the request's id.
func TestRecordOf(t *testing.T) {
	const meta = `"_meta":{"io.sharedos/outcome":{"status":"succeeded","code":"","callId":"c-7"}}`
	for name, tc := range map[string]struct {
		answer, id, want string
	}{
		"json":           {`{"jsonrpc":"2.0","id":3,"result":{"content":[],` + meta + `}}`, `3`, "c-7"},
		"string id":      {`{"jsonrpc":"2.0","id":"a","result":{` + meta + `}}`, `"a"`, "c-7"},
		"event stream":   {"event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{" + meta + "}}\r\n\r\n", `3`, "c-7"},
		"another id":     {`{"jsonrpc":"2.0","id":4,"result":{` + meta + `}}`, `3`, ""},
		"no outcome":     {`{"jsonrpc":"2.0","id":3,"result":{"content":[]}}`, `3`, ""},
		"protocol error": {`{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"x"}}`, `3`, ""},
		"not json":       {`503 unavailable`, `3`, ""},
	} {
		if got := recordOf([]byte(tc.answer), json.RawMessage(tc.id)); got != tc.want {
			t.Errorf("%s: recordOf = %q, want %q", name, got, tc.want)
		}
	}
}

func TestHomeFilesStayInTheHome(t *testing.T) {
	home := t.TempDir()
	for _, bad := range []string{"../x", "/etc/x", "a/../../x", ""} {
		if err := writeHomeFile(home, bad, "x"); err == nil {
			t.Errorf("writeHomeFile(%q) accepted a path outside the home", bad)
		}
	}
	if err := writeHomeFile(home, ".pi/agent/models.json", "{}"); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(home, ".pi", "agent", "models.json")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("written file: %v, %v", fi, err)
	}
}

// The harness's MCP configuration holds the turn's bearer: written 0600
// into the private home, with the host's own entries kept beside it.
func TestInvocationWritesTheHarnessesConfig(t *testing.T) {
	for _, harness := range Harnesses[KindMCP] {
		home := t.TempDir()
		r := &Run{Kind: KindMCP, Harness: harness, Manifest: &Manifest{Prompt: "read the files", Policy: &sharedosv1.ToolPolicy{Mode: sharedosv1.PolicyMode_POLICY_MODE_STRICT}},
			Host: Harness{Executable: "cli", Args: []string{"--host-arg"}, Env: map[string]string{"K": "V"}, ExtensionPath: "/ext",
				Files: map[string]string{".gemini/settings.json": `{"telemetry":{"enabled":false}}`}}}
		argv, env, err := r.invocation(home, "http://127.0.0.1:1/turns/t/mcp", "tok-123")
		if err != nil {
			t.Fatalf("%s: %v", harness, err)
		}
		if argv[0] != "cli" || !strings.Contains(strings.Join(argv, " "), "--host-arg") || !strings.Contains(strings.Join(argv, " "), "read the files") {
			t.Errorf("%s: argv = %q", harness, argv)
		}
		if !strings.Contains(strings.Join(env, "\n"), "HOME="+home) || !strings.Contains(strings.Join(env, "\n"), "K=V") {
			t.Errorf("%s: env = %q", harness, env)
		}
		cfg := map[string]string{"claude-code": "work/.mcp.json", "codex": ".codex/config.toml",
			"gemini-cli": ".gemini/settings.json", "pi": ".pi/agent/mcp.json"}[harness]
		b, err := os.ReadFile(filepath.Join(home, cfg))
		if err != nil {
			t.Fatalf("%s: %v", harness, err)
		}
		if fi, _ := os.Stat(filepath.Join(home, cfg)); fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %s is %v, want 0600 (it holds the bearer)", harness, cfg, fi.Mode().Perm())
		}
		if !strings.Contains(string(b), "Bearer tok-123") || !strings.Contains(string(b), "http://127.0.0.1:1/turns/t/mcp") {
			t.Errorf("%s: %s = %s", harness, cfg, b)
		}
		if harness == "gemini-cli" && !strings.Contains(string(b), `"telemetry"`) {
			t.Errorf("gemini-cli: the host's settings were dropped: %s", b)
		}
	}
}

func TestHostEnvCannotMoveTheHome(t *testing.T) {
	h := &HostConfig{MCP: map[string]Harness{"codex": {Executable: "codex", Env: map[string]string{"CODEX_HOME": "/root/.codex"}}}}
	if _, err := h.For(KindMCP, "codex"); err == nil || !strings.Contains(err.Error(), "mcp.codex.env.CODEX_HOME") {
		t.Errorf("For = %v, want the env key refused", err)
	}
	h = &HostConfig{MCP: map[string]Harness{"pi": {Executable: "pi", Extension: "pi-mcp-adapter", ExtensionPath: "node_modules/pi-mcp-adapter"}}, dir: "/hosts"}
	c, err := h.For(KindMCP, "pi")
	if err != nil || c.Extension != "pi-mcp-adapter" || c.ExtensionPath != "/hosts/node_modules/pi-mcp-adapter" {
		t.Errorf("For(pi) = %+v, %v: the name is recorded, the path resolved", c, err)
	}
}

func TestLastBytes(t *testing.T) {
	l := &lastBytes{max: 8}
	for _, s := range []string{"hello ", "world", "!"} {
		_, _ = l.Write([]byte(s))
	}
	if got := l.tail(100); got != "o world!" {
		t.Errorf("tail = %q", got)
	}
}

// A host file declaring an MCP server of its own: refused when the run is
// strict (its record would misdeclare it) and always under SharedOS's own
// server name; a permissive run may carry it.
func TestHostServersAgainstThePolicy(t *testing.T) {
	run := func(mode sharedosv1.PolicyMode, files map[string]string) error {
		r := &Run{Kind: KindMCP, Harness: "codex", Manifest: &Manifest{Prompt: "p", Policy: &sharedosv1.ToolPolicy{Mode: mode}},
			Host: Harness{Executable: "codex", Files: files}}
		_, _, err := r.invocation(t.TempDir(), "http://127.0.0.1:1/turns/t/mcp", "tok")
		return err
	}
	strict, permissive := sharedosv1.PolicyMode_POLICY_MODE_STRICT, sharedosv1.PolicyMode_POLICY_MODE_PERMISSIVE
	jira := map[string]string{".codex/config.toml": "model = \"m\"\n\n[mcp_servers.jira]\nurl = \"http://jira\"\n"}
	if err := run(strict, jira); err == nil || !strings.Contains(err.Error(), `"jira"`) {
		t.Errorf("strict with a host MCP server (TOML): %v", err)
	}
	if err := run(strict, map[string]string{".pi/agent/other.json": `{"mcpServers":{"github":{"url":"x"}}}`}); err == nil || !strings.Contains(err.Error(), `"github"`) {
		t.Errorf("strict with a host MCP server (JSON): %v", err)
	}
	if err := run(permissive, jira); err != nil {
		t.Errorf("permissive with a host MCP server: %v", err)
	}
	if err := run(permissive, map[string]string{".codex/config.toml": "[mcp_servers.sharedos]\nurl = \"x\"\n"}); err == nil || !strings.Contains(err.Error(), "SharedOS writes") {
		t.Errorf("a host file taking SharedOS's server name: %v", err)
	}
	if err := run(strict, map[string]string{".codex/config.toml": "model = \"m\"\n[model_providers.fake]\nname = \"fake\"\n"}); err != nil {
		t.Errorf("strict with model configuration only: %v", err)
	}
}
