// Package providertest is the contract suite any ToolHandlerService provider
// runs against itself: the kernel depends on these behaviours and never
// re-checks them per provider.
//
// Contract:
//   - an unknown tool is refused (gRPC InvalidArgument, NotFound or
//     Unimplemented, or an is_error result), never served;
//   - arguments that are not one JSON object are refused the same way;
//   - content_json of every answer is an MCP content array, and
//     structured_content_json, when present, is a JSON object;
//   - the provider's own cases give the expected success or tool error.
package providertest
