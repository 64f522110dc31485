package protocol

import (
	"github.com/mark3labs/mcp-go/mcp"
)

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

// IsModern reports whether v is 2026-07-28 or later, by mcp-go's rule
// (dates compare as strings, so any value after "2026-07-28" is, a
// "v999.0.0" too): the bridge must take a request for the era mcp-go
// serves it in, or its own checks of one era would pass a request mcp-go
// serves in the other.
func IsModern(v string) bool { return mcp.IsModernProtocol(v) }

// UnsupportedVersion reports whether v, a 2025-era request's
// Mcp-Protocol-Version header, names a version the turn does not serve
// (2025-11-25 transports: such a request MUST get 400 Bad Request). None
// at all is served: clients of 2025-03-26 send no header. Which versions
// are served is mcp-go's word (it negotiates them at initialize and checks
// the header on its own paths); the bridge asks it for the requests it
// answers itself. A modern value ("v999.0.0" too: IsModern) is mcp-go's
// modern path's to refuse, with the UnsupportedProtocolVersionError
// listing the versions served.
func UnsupportedVersion(v string) bool {
	return v != "" && !IsModern(v) && !mcp.IsValidProtocolVersion(v)
}
