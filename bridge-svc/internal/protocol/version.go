package protocol

import "strings"

// Protocol versions served on every turn endpoint, newest first. 2026-07-28
// is reached through server/discover; the others through initialize.
const (
	Version20260728 = "2026-07-28"
	Version20251125 = "2025-11-25"
	Version20250618 = "2025-06-18"
)

// HeaderProtocolVersion and MetaProtocolVersion say which era a request uses.
const (
	HeaderProtocolVersion = "Mcp-Protocol-Version"
	MetaProtocolVersion   = "io.modelcontextprotocol/protocolVersion"
)

// IsModern reports whether v is 2026-07-28 or later (dates compare as
// strings).
func IsModern(v string) bool {
	return len(v) == len(Version20260728) && strings.Compare(v, Version20260728) >= 0
}
