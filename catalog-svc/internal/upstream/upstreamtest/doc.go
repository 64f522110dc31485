// Package upstreamtest holds what tests of upstream MCP servers share, in
// the upstream package and the kernel's: an upstream that answers what
// mcp-go's server would never write (Rewritten).
package upstreamtest
