package mcpserver_test

import (
	"testing"

	"github.com/sharedos/toolshare/bridge-svc/internal/bridgetest"
	"github.com/sharedos/toolshare/bridge-svc/internal/mcpserver"
	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
)

// ValidateTools checks each tool once per process (by digest and name): a
// tool it passed passes again, and one it cannot serve — another digest,
// even under a name it passed — is refused every time.
func TestValidateToolsOncePerDigest(t *testing.T) {
	const schema = `{"type":"object","properties":{"path":{"type":"string"}}}`
	good := bridgetest.Tool("memo.read", "Reads.", schema, "", `{"readOnlyHint":true}`)
	bad := bridgetest.Tool("memo.read", "Reads.", schema, "", `{"readOnlyHint":"yes"}`)
	if good.GetDigest() == "" || good.GetDigest() == bad.GetDigest() {
		t.Fatalf("digests %q %q", good.GetDigest(), bad.GetDigest())
	}
	for range 2 {
		if err := mcpserver.ValidateTools([]*sharedosv1.PublishedTool{good}); err != nil {
			t.Fatalf("a servable tool: %v", err)
		}
		if err := mcpserver.ValidateTools([]*sharedosv1.PublishedTool{good, bad}); err == nil {
			t.Fatal("a tool with annotations MCP cannot carry passed")
		}
	}
	// Without a digest nothing is remembered.
	nodigest := bridgetest.Tool("memo.other", "Reads.", schema, "", `{"readOnlyHint":"no"}`)
	nodigest.Digest = ""
	if err := mcpserver.ValidateTools([]*sharedosv1.PublishedTool{nodigest}); err == nil {
		t.Fatal("a tool without a digest passed unchecked")
	}
}
