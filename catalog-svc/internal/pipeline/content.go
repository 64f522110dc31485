package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/mcpcontent"
	"github.com/sharedos/toolshare/services/contract/outcome"
	"github.com/sharedos/toolshare/services/contract/resourceuri"
	"github.com/sharedos/toolshare/services/platform/telemetry"
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
// with what MCP types as base64 base64). It returns the items.
func checkContent(content []byte) ([]mcpcontent.Raw, string) {
	items, err := mcpcontent.Items(content)
	if err != nil {
		return nil, "content that is not a JSON array"
	}
	for i, item := range items {
		if mcpcontent.Check(item) != nil {
			return nil, fmt.Sprintf("content that is not MCP content (content[%d])", i)
		}
	}
	return items, ""
}

// checkMessages says what is wrong with messages, a prompts/get result's
// messages: "" when nothing is. They are a JSON array whose every item is
// an MCP prompt message the bridge serves (mcpcontent.CheckMessage: a role
// "user" or "assistant", and MCP content). It returns the content of each.
func checkMessages(messages []byte) ([]mcpcontent.Raw, string) {
	items, err := mcpcontent.Items(messages)
	if err != nil {
		return nil, "prompt messages that are not a JSON array"
	}
	contents := make([]mcpcontent.Raw, len(items))
	for i, item := range items {
		var err error
		switch contents[i], err = mcpcontent.CheckMessage(item); {
		case errors.Is(err, mcpcontent.ErrRole):
			return nil, fmt.Sprintf("a prompt message whose role is neither user nor assistant (messages[%d])", i)
		case err != nil:
			return nil, fmt.Sprintf("a prompt message that is not an MCP prompt message (messages[%d]: a role and MCP content)", i)
		}
	}
	return contents, ""
}

// maxEmbeddedResources bounds the distinct resources an upstream's answer
// embeds.
const maxEmbeddedResources = 256

// foreignEmbedded holds the resources an upstream's content embeds (items,
// content items Check took; where names them, "content" or
// "messages[%d].content") to the rule that a resource embedded under a URI
// is the source's own: a URI one of source's registrations serves, or one
// no source registers (catalog.Service.ForeignResource). Under another
// source's URI (an upstream's prompt embedding "FORGED" contents as
// test://static-text, a native provider's resource: attack run S2), the
// harness would take the contents for that resource's, which that source
// never served and nothing authorized. A read's contents are held to a
// stricter rule (checkContents: the URI read, or one its registration
// serves); a native provider's content is not held to this one, its
// registrations being the operator's own. It returns what is wrong ("":
// nothing), or the attempt's outcome when the registrations cannot be
// read.
func (s *Pipeline) foreignEmbedded(ctx context.Context, source string, items []mcpcontent.Raw, where func(i int) string) (string, *sharedosv1.ToolResult) {
	var uris []string
	var at []int
	seen := map[string]bool{}
	for i, item := range items {
		u, ok := mcpcontent.EmbeddedURI(item)
		switch {
		case !ok || seen[u]:
			continue
		case len(u) > resourceuri.MaxURIBytes:
			return where(i) + fmt.Sprintf(" embeds a resource whose URI is longer than a resource URI may be (%d bytes)", resourceuri.MaxURIBytes), nil
		case len(uris) == maxEmbeddedResources:
			// Each is compared with every resource registration (review:
			// thousands of long URIs would cost seconds a call).
			return where(i) + fmt.Sprintf(" embeds more than %d distinct resources", maxEmbeddedResources), nil
		}
		seen[u] = true
		uris, at = append(uris, u), append(at, i)
	}
	if len(uris) == 0 {
		return "", nil
	}
	if s.entries == nil {
		// No registry to tell whose a URI is: not passed on as anyone's.
		return "", outcome.Failed(outcome.Internal, "this kernel cannot tell whose resources an upstream's content embeds")
	}
	i, other, err := s.entries.ForeignResource(ctx, source, uris)
	if err != nil {
		if res := contextOutcome(ctx); res != nil {
			return "", res
		}
		s.logger.ErrorContext(ctx, "resource registrations", slog.Any("error", err))
		return "", outcome.Failed(outcome.Internal, "the resource registry could not be read")
	}
	if i < 0 {
		return "", nil
	}
	// The registration is the operator's, named in the log; the reason
	// names neither it (the turn may not see it) nor the content's URI.
	s.logger.WarnContext(ctx, "an upstream's content embeds another source's resource", slog.String("source", source),
		slog.String("registration", telemetry.Escape(other, 200)))
	return where(at[i]) + " embeds a resource under a URI another source's resource registration serves: passed on, it would read as that resource's contents", nil
}
