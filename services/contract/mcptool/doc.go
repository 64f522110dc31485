// Package mcptool turns a published tool into the MCP tool a turn serves
// (mark3labs/mcp-go): the one place that says what the bridge can serve, so
// the catalogue refuses at registration what a turn would fail on.
package mcptool
