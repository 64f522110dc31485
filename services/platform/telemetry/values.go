package telemetry

import (
	"encoding/hex"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxValueBytes caps a string a harness chose (a tool name, a resource
// URI, a JSON-RPC id, a client's call id, a protocol version) once
// EscapeValue has escaped it for a span attribute or a log line. It is the
// kernel's cap for a recorded tool name (records.MaxToolBytes), so the
// bridge's sharedos.tool.requested, the kernel's and the operation record's
// requested_tool are one string.
const MaxValueBytes = 256

// EscapeValue returns s, a string a harness chose, in the form it may take
// on a span or in a log line: Escape(s, MaxValueBytes). Its cost is
// bounded by MaxValueBytes, not by len(s).
func EscapeValue(s string) string { return Escape(s, MaxValueBytes) }

// Escape renders s with strconv.Quote's escaping (without the quotes):
// printable UTF-8 stays as is, NUL, control characters (a newline, ESC)
// and invalid bytes become \x00-style escapes, and backslash and double
// quote are escaped so the form is unambiguous. The result is cut at a
// rune boundary so it fits max bytes; a cut result ends with "…" so a
// reader can tell. Only as much of s is read as the result can hold.
func Escape(s string, max int) string {
	const ellipsis = "…"
	if len(s) <= max && plainASCII(s) {
		return s // the common case: nothing to escape, nothing to cut
	}
	var b strings.Builder
	i := 0
	for i < len(s) && b.Len() <= max {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteString(`\x`)
			b.WriteString(hex.EncodeToString([]byte{s[i]}))
		} else {
			q := strconv.Quote(s[i : i+size])
			b.WriteString(q[1 : len(q)-1])
		}
		i += size
	}
	out := b.String()
	if i == len(s) && len(out) <= max {
		return out
	}
	cut := max - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(out[cut]) {
		cut--
	}
	return out[:cut] + ellipsis
}

// plainASCII reports whether s is printable ASCII without '"' or '\\',
// which strconv.Quote leaves unchanged.
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}
