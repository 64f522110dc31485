// Package inputround names the input requests a tool may ask of the
// client mid-call (MCP 2026-07-28 input rounds, SEP-2322; a 2025-era
// server's own requests) and the client capability that answers each: the
// bridge turns what a harness declared into the methods it can answer, the
// kernel refuses a request for any other, and an upstream MCP server is
// told, per call, only the capabilities of those methods.
package inputround
