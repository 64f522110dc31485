package pipeline

import (
	"errors"
	"fmt"

	"github.com/sharedos/toolshare/services/contract/mcpcontent"
)

// What a provider answers is checked as the bridge will serve it, before
// the attempt is recorded succeeded: passed on, content the bridge cannot
// serve fails the request there (a tools/call failed/handler_error, a
// prompts/get a JSON-RPC error) while the record says succeeded (attack
// run C2, S1). The checks read the content without a copy of it
// (mcpcontent), and say what is wrong by position alone: the content is
// the provider's, and may quote the arguments (invariant 11).

// checkContent says what is wrong with content, a tool result's content:
// "" when nothing is. It is a JSON array whose every item is MCP content
// the bridge serves (mcpcontent.Check: what mcp.UnmarshalContent takes,
// with what MCP types as base64 base64).
func checkContent(content []byte) string {
	items, err := mcpcontent.Items(content)
	if err != nil {
		return "content that is not a JSON array"
	}
	for i, item := range items {
		if mcpcontent.Check(item) != nil {
			return fmt.Sprintf("content that is not MCP content (content[%d])", i)
		}
	}
	return ""
}

// checkMessages says what is wrong with messages, a prompts/get result's
// messages: "" when nothing is. They are a JSON array whose every item is
// an MCP prompt message the bridge serves (mcpcontent.CheckMessage: a role
// "user" or "assistant", and MCP content).
func checkMessages(messages []byte) string {
	items, err := mcpcontent.Items(messages)
	if err != nil {
		return "prompt messages that are not a JSON array"
	}
	for i, item := range items {
		switch _, err := mcpcontent.CheckMessage(item); {
		case errors.Is(err, mcpcontent.ErrRole):
			return fmt.Sprintf("a prompt message whose role is neither user nor assistant (messages[%d])", i)
		case err != nil:
			return fmt.Sprintf("a prompt message that is not an MCP prompt message (messages[%d]: a role and MCP content)", i)
		}
	}
	return ""
}
