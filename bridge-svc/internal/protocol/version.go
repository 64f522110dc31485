package protocol

import (
	"net/http"

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

// ErrorStatus is the HTTP status of a JSON-RPC error answering a request
// the server took up (a handler's answer: the transport's own refusals,
// such as Parse's, are 400 in every era), modern or not, as mcp-go
// answers its own. A 2025-era request's error comes with 200: the
// official TypeScript client reads a JSON-RPC error only from a 2xx and
// reports any other status as a bare HTTP error, so the outcome in the
// error's data would be lost. 2026-07-28 answers 400 what could not be
// processed (a header mismatch, a missing client capability, an
// unsupported version: the spec's MUST; invalid params, request or JSON:
// mcp-go's, which its clients read from the body), 404 an unknown method
// (MUST), and anything else 200.
func ErrorStatus(modern bool, code int) int {
	if !modern {
		return http.StatusOK
	}
	switch code {
	case CodeMethodNotFound:
		return http.StatusNotFound
	case CodeHeaderMismatch, CodeMissingCapability, mcp.UNSUPPORTED_PROTOCOL_VERSION,
		CodeInvalidRequest, CodeInvalidParams, CodeParseError:
		return http.StatusBadRequest
	}
	return http.StatusOK
}
