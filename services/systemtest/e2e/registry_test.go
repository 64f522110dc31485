package e2e

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sharedos/toolshare/services/platform/pgdb/pgtest"
	"github.com/sharedos/toolshare/services/systemtest/launch"
)

// TestPromptAndResourceRegistry (ADR 0018): sharedosctl registers prompts
// and resources from YAML or JSON files, lists them with the catalogue's
// revisions, replaces one by registering it again, refuses a bad one
// naming the field and the rule, and deregisters.
func TestPromptAndResourceRegistry(t *testing.T) {
	s := startStack(t, launch.Options{DatabaseURL: pgtest.NewDatabase(t, noMigrate)})
	dir := t.TempDir()
	prompts := filepath.Join(dir, "prompts.yaml")
	write := func(path, body string) {
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(prompts, `- name: code.review
  title: Review
  description: Reviews a change.
  arguments:
    - {name: change, description: what to review, required: true}
  metadata: {namespace: code, source: "provider:code"}
  handler: {target: "127.0.0.1:7405", timeout: 5s}
- name: test_simple_prompt
  description: A simple prompt.
  handler: {target: "127.0.0.1:7405"}
`)
	var reg struct {
		Registered []struct {
			Key      string `json:"key"`
			Revision int64  `json:"revision"`
		} `json:"registered"`
	}
	s.ctlJSON(t, &reg, "prompts", "register", "-f", prompts)
	if len(reg.Registered) != 2 || reg.Registered[0].Key != "code.review" || reg.Registered[0].Revision != 1 {
		t.Fatalf("registered %+v", reg)
	}
	s.ctlJSON(t, &reg, "prompts", "register", "-f", prompts)
	if reg.Registered[0].Revision != 2 {
		t.Fatalf("registered again %+v: want revision 2", reg)
	}
	var listed struct {
		Registrations []struct {
			Name      string `json:"name"`
			Arguments []struct {
				Name     string `json:"name"`
				Required bool   `json:"required"`
			} `json:"arguments"`
			Handler struct {
				Timeout string `json:"timeout"`
			} `json:"handler"`
			Revision string `json:"revision"`
		} `json:"registrations"`
	}
	s.ctlJSON(t, &listed, "prompts", "list")
	if len(listed.Registrations) != 2 || listed.Registrations[0].Name != "code.review" || !listed.Registrations[0].Arguments[0].Required ||
		listed.Registrations[0].Handler.Timeout != "5s" || listed.Registrations[0].Revision != "2" {
		t.Fatalf("prompts list %+v", listed)
	}

	resources := filepath.Join(dir, "resources.json")
	write(resources, `[{"uri":"test://static-text","name":"static text","mimeType":"text/plain","handler":{"target":"127.0.0.1:7405"}},
 {"uri":"test://template/{id}/data","name":"template data","handler":{"target":"127.0.0.1:7405"}}]`)
	s.ctlJSON(t, &reg, "resources", "register", "-f", resources)
	if len(reg.Registered) != 2 || reg.Registered[1].Key != "test://template/{id}/data" {
		t.Fatalf("resources registered %+v", reg)
	}
	out, code := s.ctl(t, "resources", "list")
	if code != 0 || !strings.Contains(out, `"test://static-text"`) || !strings.Contains(out, `"test://template/{id}/data"`) {
		t.Fatalf("resources list: %d %s", code, out)
	}

	// A turn pins what its context may list (ADR 0018): the conformance
	// role lists test_simple_prompt and the template; alice/engineer none.
	var opened struct {
		McpURL               string   `json:"mcpUrl"`
		Token                string   `json:"token"`
		Prompts              []string `json:"prompts"`
		Resources            []string `json:"resources"`
		PromptsResourcesHash string   `json:"promptsResourcesHash"`
	}
	s.ctlJSON(t, &opened, "turn", "open", "--principal", "ci", "--role", "conformance", "--harness", "e2e")
	if strings.Join(opened.Prompts, ",") != "test_simple_prompt" || strings.Join(opened.Resources, ",") != "test://static-text,test://template/{id}/data" ||
		len(opened.PromptsResourcesHash) != 64 {
		t.Fatalf("the conformance turn pinned %+v", opened)
	}
	// Getting the pinned prompt reaches the kernel, which finds it pinned
	// and dispatches it (its provider is not running here: failed).
	getPrompt := func(name string) (int, string) {
		body := `{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"` + name +
			`","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
		req, _ := http.NewRequest(http.MethodPost, opened.McpURL, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+opened.Token)
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "prompts/get")
		req.Header.Set("Mcp-Name", name)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		got, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(got)
	}
	if code, got := getPrompt("test_simple_prompt"); !strings.Contains(got, `"code":-32603`) || !strings.Contains(got, "failed: ") {
		t.Fatalf("prompts/get of a pinned prompt: %d %s", code, got)
	}
	// A prompt the turn did not pin is refused before mcp-go, recorded.
	if code, got := getPrompt("code.review"); code != http.StatusBadRequest || !strings.Contains(got, `"code":-32602`) ||
		!strings.Contains(got, "not in this turn's catalogue") {
		t.Fatalf("prompts/get of an unpinned prompt: %d %s", code, got)
	}
	var ops []struct{ Tool, Status, Code, Kind string }
	s.ctlJSON(t, &ops, "ops", "list", "--turn", strings.Split(strings.Split(opened.McpURL, "/turns/")[1], "/")[0])
	if len(ops) != 2 || ops[0].Kind != "prompt" || ops[0].Status != "failed" || ops[1].Tool != "code.review" || ops[1].Code != "tool_unavailable" {
		t.Fatalf("records %+v: want both prompt attempts", ops)
	}
	var engineer struct {
		Prompts              []string `json:"prompts"`
		PromptsResourcesHash string   `json:"promptsResourcesHash"`
	}
	s.ctlJSON(t, &engineer, "turn", "open", "--principal", "alice", "--role", "engineer", "--harness", "e2e")
	if len(engineer.Prompts) != 0 || engineer.PromptsResourcesHash == opened.PromptsResourcesHash {
		t.Fatalf("the engineer turn pinned %+v", engineer)
	}

	bad := filepath.Join(dir, "bad.yaml")
	write(bad, "uri: test://t/{+path}\nname: bad\nhandler: {target: x}\n")
	if _, stderr, code := s.Ctl(t, "resources", "register", "-f", bad); code == 0 || !strings.Contains(stderr, "uri") ||
		!strings.Contains(stderr, "resource_uri") {
		t.Fatalf("a bad resource: exit %d, %s", code, stderr)
	}
	write(bad, "name: code.review\nbogus: 1\n")
	if _, stderr, code := s.Ctl(t, "prompts", "register", "-f", bad); code == 0 || !strings.Contains(stderr, "bogus") {
		t.Fatalf("an unknown field: exit %d, %s", code, stderr)
	}

	if _, code := s.ctl(t, "prompts", "deregister", "code.review"); code != 0 {
		t.Fatal("deregister failed")
	}
	if _, stderr, code := s.Ctl(t, "prompts", "deregister", "code.review"); code == 0 || !strings.Contains(strings.ToLower(stderr), "not found") {
		t.Fatalf("deregister twice: exit %d, %s", code, stderr)
	}
	if _, code := s.ctl(t, "resources", "deregister", "test://static-text"); code != 0 {
		t.Fatal("deregister resource failed")
	}
}
