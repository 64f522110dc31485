// Package protocol is the bridge's HTTP edge in front of mcp-go: the checks
// the MCP specification asks of a server that mcp-go does not make (Origin,
// Host on any socket, Content-Type, body size) and a strict JSON-RPC
// pre-parse that refuses what encoding/json would silently accept
// (case-folded or duplicate keys, a null id, deep nesting) and bounds what
// mcp-go decodes into maps (params._meta, the values of params), plus the
// protocol-version constants of both eras served on one URL.
package protocol
