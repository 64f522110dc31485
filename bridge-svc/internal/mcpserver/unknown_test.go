package mcpserver

import (
	"context"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

func TestUnknownNamesReachTheHandler(t *testing.T) {
	u := unknownNames{published: map[string]bool{"files.read": true}}
	tools := []mcp.Tool{mcp.NewTool("files.read"), dispatcherTool()}
	for _, c := range []struct {
		name      string
		rewritten bool
	}{{"files.read", false}, {"nope.tool", true}, {"", true},
		// Calling the dispatcher by its own name is just another unpublished
		// name: forwarded as asked and refused by the kernel.
		{"sharedos dispatch", true}} {
		ctx, _ := withCallState(context.Background())
		req := mcp.CallToolRequest{}
		req.Params.Name = c.name
		u.beforeCall(ctx, 7, &req)
		if got := stateFrom(ctx).rewritten; got != c.rewritten || (got && req.Params.Name != dispatcherName) {
			t.Errorf("%q: rewritten = %v, want %v", c.name, got, c.rewritten)
		}
		name, id := requested(ctx, req)
		if name != c.name || id != 7 {
			t.Errorf("%q: handler sees %q (id %v), want the requested name and id 7", c.name, name, id)
		}
		listed := u.filter(ctx, tools)
		if c.rewritten != (len(listed) == 2) {
			t.Errorf("%q: filter kept %d tools; the dispatcher must be findable only for a rewritten call", c.name, len(listed))
		}
	}
	// tools/list (no call in the request): the dispatcher is hidden.
	listCtx, _ := withCallState(context.Background())
	if got := u.filter(listCtx, tools); len(got) != 1 || got[0].Name != "files.read" {
		t.Errorf("tools/list shows %v", got)
	}
}
