// Package forward turns one MCP tools/call into one kernel ToolCall and the
// kernel's ToolResult back into an MCP result. It is where the refusal
// contract is kept: denied and failed become isError results whose text says
// which, cancellation aborts, and nothing a harness invented (an alias, an
// injected argument key) reaches the ToolCall.
package forward
