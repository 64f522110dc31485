package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sharedos/toolshare/services/systemtest/launch"
)

// TestPromptAndResourceRegistry (ADR 0018): sharedosctl registers prompts
// and resources from YAML or JSON files, lists them with the catalogue's
// revisions, replaces one by registering it again, refuses a bad one
// naming the field and the rule, and deregisters.
func TestPromptAndResourceRegistry(t *testing.T) {
	s := startStack(t, launch.Options{})
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
		Prompts              []string `json:"prompts"`
		Resources            []string `json:"resources"`
		PromptsResourcesHash string   `json:"promptsResourcesHash"`
	}
	s.ctlJSON(t, &opened, "turn", "open", "--principal", "ci", "--role", "conformance", "--harness", "e2e")
	if strings.Join(opened.Prompts, ",") != "test_simple_prompt" || strings.Join(opened.Resources, ",") != "test://static-text,test://template/{id}/data" ||
		len(opened.PromptsResourcesHash) != 64 {
		t.Fatalf("the conformance turn pinned %+v", opened)
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
