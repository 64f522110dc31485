// Package mcpserver serves /turns/{turnId}/mcp: one mcp-go MCPServer and
// StreamableHTTPServer per turn lease, built lazily from the lease on
// whichever pod gets the request, cached, and dropped when the lease closes
// or expires. In front of mcp-go sit the edge checks (package protocol) and
// the bearer check bound to the turn; every tools/call, including names the
// turn never published, goes to the kernel through package forward.
package mcpserver
