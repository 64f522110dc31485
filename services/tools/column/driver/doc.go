// Package driver puts SharedOS in the model provider's seat (ADR 0014, the
// scripted and live columns of issue 21). It speaks each vendor's API-layer
// tool-call shape — Anthropic Messages, OpenAI Responses, pi-ai — against a
// turn's MCP endpoint: it renders the turn's catalogue (what its tools/list
// lists) as the vendor's tool definitions, translates each vendor tool call
// exactly into an MCP tools/call on the turn, so the call goes bridge →
// kernel → record like any harness's, and renders the MCP result back in the
// vendor's shape. It is a library for anyone building an agent loop of
// their own; Loop is one such loop.
//
// Rendering is pure and separate from execution:
//
//   - NewCatalogue renders a catalogue ([]Tool) for a Vendor: Definitions,
//     and the bijection between canonical tool names and vendor names;
//   - Catalogue.ParseCall turns one vendor tool-call item into a Call (the
//     MCP name and the arguments' exact bytes);
//   - Catalogue.RenderResult turns an MCP result into the vendor's result
//     item, and Observe reads the SharedOS outcome from it.
//
// Turn (Open) is the execution side: an mcp-go Streamable HTTP client on the
// turn's URL with its bearer token; Turn.Execute is ParseCall, the tools/call
// and the rendering in one step.
//
// Loop is the live column: a turn loop against an Anthropic-Messages- or
// OpenAI-Responses-compatible endpoint (non-streaming JSON). It sends the
// declared model string and the credential the host gives it and selects
// nothing else; each tool call the model makes goes through Turn.Execute.
//
// # Names
//
// Anthropic and OpenAI function names must match ^[a-zA-Z0-9_-]{1,64}$ (pi
// is held to the same rule). A canonical tool name (ToolNameSchema: 1–128
// characters of [A-Za-z0-9_.-]) that fits is used as it is; one that does
// not is given the bridge's portable spelling (forward.PortableName in
// bridge-svc, which is toolname.CollisionKey): every character outside
// [A-Za-z0-9_] — '.' and, in such a name, '-' — becomes '_' (files.read →
// files_read, a.b-c → a_b_c). The mapping is a bijection per catalogue: two
// tools with one vendor name (a.b and a_b), or a vendor name longer than 64
// characters, make NewCatalogue fail with a *NameError naming the tools;
// nothing is silently rewritten. A call under a name the catalogue did not
// render is sent to the turn under that exact name: the kernel refuses it
// and records the attempt (ADR 0004).
//
// # Arguments
//
// Arguments are never re-encoded by the driver: Call.Arguments are the
// bytes of the Anthropic "input" or pi "arguments" object, or the content
// of the OpenAI Responses "arguments" string; none or null is {}. Arguments
// that are not a JSON object (MCP requires one) are not sent: ParseCall
// returns an *ArgumentsError (errors.Is ErrInvalidArguments) and
// RenderInvalidArguments is the error result to give the model. mcp-go's
// client then encodes the tools/call request with encoding/json: keys,
// numbers and escapes travel as written, whitespace outside strings is
// compacted and "<", ">", "&", U+2028 and U+2029 inside strings become \u
// escapes (the same JSON value).
//
// # Results
//
// MCP content maps to the vendor, in order, as follows. Text is a text
// block (openai-responses: the texts joined by "\n" in the output string;
// Anthropic leaves out empty texts, which the Messages API refuses).
// An image is an image block (Anthropic base64 source, pi data and
// mimeType); openai-responses gets the text "[image MIME]". Content no
// vendor carries becomes a text block describing it: audio "[audio MIME]";
// a resource link "[resource_link URI name="NAME" mimeType=MIME]"; an
// embedded text resource "[resource URI mimeType=MIME]", a newline and its
// text; an embedded blob "[resource URI mimeType=MIME blob]" (attributes
// that are not set are left out). structuredContent, when no text content
// came with it, is added as a text block holding its JSON.
//
// The error flag is carried as is_error (Anthropic) and isError (pi). An
// OpenAI function_call_output has none, so the text carries it: SharedOS
// refusals begin "denied: " or "failed: " already, and any other error
// text is given "error: " in front.
//
// # Observations
//
// Each executed call yields an Observation: the vendor's call id beside
// the kernel's record id (callId), decision id, status and code, read from
// the result's _meta["io.sharedos/outcome"] (services/contract/outcome). A
// scripted column grades declared attempts by matching the vendor call id
// it scripted to the record's callId.
package driver
