// Package toolname holds the two naming rules of SharedOS toolshare and the
// helpers built on them.
//
// ToolNameSchema (Validate) governs a tool's canonical name: 1–128
// characters, each of [A-Za-z0-9_.-]. The canonical name is also the raw MCP
// Tool.name a harness sees (ADR 0014), so the character set has to be one
// every harness carries unchanged on the wire. The rule is ASCII-only, so a
// byte count and a character count are the same for every accepted name.
// A registration whose name fails this rule is rejected at registration,
// not at the first tools/list.
//
// IdentifierSchema (ValidateIdentifier) governs opaque host identifiers —
// turn ids, call ids, lease ids, principals. It is deliberately a different
// and wider rule: 1–256 bytes, each printable ASCII other than space
// ([\x21-\x7E]). Identifiers are minted by hosts and identity providers
// (UUIDs, "user:alice@example.com", "spiffe://td/ns/x/sa/y"), so they may
// hold ':', '/', '@' and the like, but never whitespace, control characters
// or non-ASCII, which is what makes them safe to log, to put in a header and
// to compare byte for byte. They never go on the wire as a tool name.
//
// NamespaceSchema (ValidateNamespaceField) governs a namespace given on its
// own, an upstream provider's, whose tools are named namespace.tool: 1–126
// characters of [A-Za-z0-9_-], so that it is the names' first segment and
// leaves room for a local name within ToolNameSchema.
//
// Parse splits a provider-qualified name ("github.search") at its first dot
// into Namespace "github" and Local "search"; brokered providers are never
// flattened into unqualified names, so github.search and notion.search stay
// two identities.
//
// CollisionKey is the name a harness is likely to make of a canonical name:
// Claude, Codex and Pi rewrite '.' to '_' and Codex also rewrites '-', so
// files.read, files_read and files-read all arrive as files_read and a
// harness either drops one of them silently or renames it. A catalogue in
// which two names share a collision key must therefore be refused; see
// FindCollision.
//
// Errors are *Error values naming the field and the rule that failed, and
// match ErrInvalid with errors.Is.
package toolname
