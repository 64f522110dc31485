package mcpserver

import (
	"context"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/sharedos/toolshare/bridge-svc/internal/protocol"
	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/platform/telemetry"
)

// completions answer a turn's completion/complete. A provider has no
// completion contract with the kernel, so a pinned prompt or resource is
// answered with no values, as mcp-go's own providers answer; one the turn
// did not pin is invalid params (-32602, data.uri for a resource), as MCP
// answers a prompt name it does not know — mcp-go's answered any name with
// no values, which told the client nothing was wrong. The params are the
// edge's to check first (protocol.Parse: a ref of an unknown type, no ref
// or no argument are -32602 there, not mcp-go's -32600).
type completions struct {
	entries pinnedEntries
}

var (
	_ server.PromptCompletionProvider   = completions{}
	_ server.ResourceCompletionProvider = completions{}
)

// CompletePromptArgument implements server.PromptCompletionProvider.
func (c completions) CompletePromptArgument(ctx context.Context, name string, _ mcp.CompleteArgument, _ mcp.CompleteContext) (*mcp.Completion, error) {
	if !c.entries.pinned(sharedosv1.CallKind_CALL_KIND_PROMPT, name) {
		return nil, replaced(stateFrom(ctx), &protocol.RPCError{Code: protocol.CodeInvalidParams,
			Message: "invalid params: no prompt " + quotedName(name) + " in this turn's catalogue"})
	}
	return &mcp.Completion{Values: []string{}}, nil
}

// CompleteResourceArgument implements server.ResourceCompletionProvider: a
// ref names a pinned resource or template as the turn lists it, or a URI a
// pinned template serves.
func (c completions) CompleteResourceArgument(ctx context.Context, uri string, _ mcp.CompleteArgument, _ mcp.CompleteContext) (*mcp.Completion, error) {
	if !c.entries.resources.Has(uri) && !c.entries.pinned(sharedosv1.CallKind_CALL_KIND_RESOURCE, uri) {
		return nil, replaced(stateFrom(ctx), &protocol.RPCError{Code: protocol.CodeInvalidParams,
			Message: "invalid params: no resource " + quotedName(uri) + " in this turn's catalogue", Data: map[string]any{"uri": uri}})
	}
	return &mcp.Completion{Values: []string{}}, nil
}

// quotedName is a client's name or URI as an error message quotes it: escaped
// and bounded.
func quotedName(s string) string { return `"` + telemetry.Escape(s, 120) + `"` }
