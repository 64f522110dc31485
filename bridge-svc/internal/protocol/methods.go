package protocol

import "github.com/mark3labs/mcp-go/mcp"

// methods are the JSON-RPC methods of MCP, requests and notifications of
// either direction, in every revision the bridge serves (mcp-go's names,
// and the notifications it sends by string): the values a span may carry
// as mcp.method.name.
var methods = setOf(
	mcp.MethodInitialize, mcp.MethodPing,
	mcp.MethodResourcesList, mcp.MethodResourcesTemplatesList, mcp.MethodResourcesRead,
	mcp.MethodResourcesSubscribe, mcp.MethodResourcesUnsubscribe,
	mcp.MethodPromptsList, mcp.MethodPromptsGet, mcp.MethodToolsList, mcp.MethodToolsCall,
	mcp.MethodSetLogLevel, mcp.MethodElicitationCreate, mcp.MethodListRoots, mcp.MethodSamplingCreateMessage,
	mcp.MethodTasksGet, mcp.MethodTasksList, mcp.MethodTasksResult, mcp.MethodTasksCancel,
	mcp.MethodCompletionComplete, mcp.MethodServerDiscover, mcp.MethodSubscriptionsListen,
	mcp.MethodNotificationInitialized, mcp.MethodNotificationCancelled, mcp.MethodNotificationProgress,
	mcp.MethodNotificationMessage, mcp.MethodNotificationElicitationComplete,
	"notifications/resources/updated", "notifications/resources/list_changed",
	"notifications/tools/list_changed", "notifications/prompts/list_changed",
	"notifications/roots/list_changed", "notifications/tasks/status",
	"notifications/subscriptions/acknowledged",
)

func setOf(ms ...mcp.MCPMethod) map[string]bool {
	set := make(map[string]bool, len(ms))
	for _, m := range ms {
		set[string(m)] = true
	}
	return set
}

// KnownMethod reports whether method is a method of MCP. Any other string
// in a message's "method" is the client's choice, answered -32601 by
// mcp-go; the bridge's telemetry names it only as such
// (telemetry.MCPMethodOther), never by what was sent.
func KnownMethod(method string) bool { return methods[method] }
