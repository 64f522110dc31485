// Package conformance is a ToolHandlerService serving the fixture tools of
// the official MCP conformance suite (@modelcontextprotocol/conformance)
// that fit a tools-only server: test_simple_text, test_image_content,
// test_audio_content, test_embedded_resource, test_multiple_content_types,
// test_error_handling and json_schema_2020_12_tool. Registered in a
// catalogue, it lets the suite run through the whole SharedOS path (bridge →
// kernel → provider). Fixtures that need a server-to-client channel
// (logging, progress, sampling, elicitation) are not served: a SharedOS
// provider answers one Handle call and cannot reach the client.
package conformance
