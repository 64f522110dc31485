package mcpcontent

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"
)

// ErrRole: a prompt message's role is neither "user" nor "assistant" (MCP's Role).
var ErrRole = errors.New(`role must be "user" or "assistant"`)

// CheckMessage refuses an item of a prompts/get result's messages that the
// bridge cannot serve as an MCP PromptMessage: what does not decode, as the
// bridge decodes it (encoding/json), into a role string and a content; a
// role other than "user" or "assistant" (MCP's Role: a client refuses any
// other); a content Check refuses (what the bridge's mcp.UnmarshalContent
// refuses, and what MCP types as base64 that is not). It returns the
// content, a slice of item: nothing of it is copied.
func CheckMessage(item []byte) (content Raw, err error) {
	var m struct {
		Role    string `json:"role"`
		Content Raw    `json:"content"`
	}
	if err := json.Unmarshal(item, &m); err != nil {
		return nil, err
	}
	if m.Role != string(mcp.RoleUser) && m.Role != string(mcp.RoleAssistant) {
		return nil, ErrRole
	}
	if err := Check(m.Content); err != nil {
		return nil, fmt.Errorf("content: %w", err)
	}
	return m.Content, nil
}
