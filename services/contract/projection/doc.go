// Package projection turns a registered tool into what crosses the MCP
// boundary: the authority-free PublishedTool a harness receives, and the
// canonical bytes catalogHash is computed over (shared/spec/catalog-hash.md).
//
// The projection is defined by what it omits. Only CATALOG_HASH_FIELDS
// participate — name, description, inputSchema, outputSchema, annotations,
// and metadata{namespace, source} — and requirements, grants, handler
// references, credentials, execution ids, harness aliases, titles and
// transports never do. That is enforced by construction rather than by a
// deny-list: Tool has exactly those seven fields, and the bytes are written
// from a fixed struct whose JSON fields are exactly those keys (tested by
// reflection), so there is no path by which another key can be emitted. A
// field added to either struct fails the tests.
//
// A value that is absent, JSON null or an empty string is omitted, as is an
// empty object for annotations or metadata, so "no annotations" hashes the
// same however a registry spells it. JSON-valued fields are canonicalized
// (RFC 8785, package canonjson) before they are embedded, and the whole
// object is canonicalized again, so the result is JCS whatever encoding/json
// does with strings.
//
// Canonical bytes are meant to be computed once, at registration, and
// cached: catalogHash of any subset is then a sort and a SHA-256 over the
// cached bytes (package cataloghash), never a per-request canonicalization.
package projection
