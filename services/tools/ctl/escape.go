package ctl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"
)

// This file owns how sharedosctl shows text that others chose — a
// principal a host or an identity provider asserted, an upstream server's
// tool definition, a policy's reason, a service's error — on a terminal.
// One rule (hiddenRune) decides which characters are never written as
// themselves, wherever they are written: table cells and `tools diff`
// lines (cell, \u escapes), error messages on stderr (message), and every
// JSON output (escapeJSON, JSON \u escapes that decode to the same string).

// hiddenRune reports whether r is written escaped: a character that drives
// a terminal or hides or disguises text instead of showing itself.
//
//   - control characters (Cc): C0 (ESC, CR, LF, tab…), DEL and C1 —
//     U+009B is CSI and U+009D OSC to xterm-family terminals;
//   - format characters (Cf): bidirectional overrides and isolates
//     (U+202A–U+202E, U+2066–U+2069), zero-width characters (U+200B–U+200D,
//     U+2060, U+FEFF), soft hyphen, and the assigned tag characters;
//   - the line and paragraph separators U+2028 and U+2029;
//   - the whole tag block U+E0000–U+E007F, assigned or not: tags spell
//     ASCII that no terminal shows;
//   - the variation selectors supplement U+E0100–U+E01EF, which can carry
//     a hidden byte each after any character;
//   - surrogates (never a character alone), noncharacters (U+FDD0–U+FDEF
//     and U+xFFFE, U+xFFFF of every plane), and U+FFFD, which is also what
//     a byte that is not UTF-8 decodes to.
func hiddenRune(r rune) bool {
	switch {
	case r < 0 || r > unicode.MaxRune:
		return true
	case r < 0x80:
		return r < 0x20 || r == 0x7f
	case r == 0x2028 || r == 0x2029:
		return true
	case r >= 0xd800 && r <= 0xdfff:
		return true
	case r >= 0xfdd0 && r <= 0xfdef, r&0xfffe == 0xfffe:
		return true
	case r == utf8.RuneError:
		return true
	case r >= 0xe0000 && r <= 0xe007f, r >= 0xe0100 && r <= 0xe01ef:
		return true
	}
	return unicode.IsControl(r) || unicode.Is(unicode.Cf, r)
}

// cell is s as a table shows it: every hidden character (hiddenRune) and
// every byte that is not UTF-8 written as a \u escape (\U and eight digits
// above U+FFFF; a byte that is not UTF-8 as \ufffd). Tables show text that
// upstream servers, models and policies chose — a skipped tool's name, a
// server's name, a reason, a tool's definition — which must not drive the
// operator's terminal, break a row or hide itself.
func cell(s string) string {
	if !hasHidden(s) {
		return s
	}
	var b strings.Builder
	for _, r := range s { // a byte that is not UTF-8 is utf8.RuneError here
		switch {
		case !hiddenRune(r):
			b.WriteRune(r)
		case r > 0xffff:
			fmt.Fprintf(&b, `\U%08x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	return b.String()
}

func hasHidden(s string) bool { return strings.IndexFunc(s, hiddenRune) >= 0 }

// message is an error's text as it goes to stderr: one line, as cell shows
// it — a line break an error carries (a service's message, a claim an
// identity provider signed) is written \u000a, so it cannot start a line
// that looks like the command's own output.
func message(s string) string { return cell(s) }

// lines is text of many lines (a diff) as a terminal shows it: each line
// as cell shows it, the line breaks kept.
func lines(s string) string {
	ls := strings.Split(s, "\n")
	for i, l := range ls {
		ls[i] = cell(l)
	}
	return strings.Join(ls, "\n")
}

// escapeJSON rewrites encoded JSON so that no string in it carries a hidden
// character (hiddenRune) or a byte that is not UTF-8: each is written as a
// \uXXXX escape (a surrogate pair above U+FFFF; \ufffd for a byte that is
// not UTF-8, which a decoder reads as U+FFFD anyway). The JSON decodes to
// the same values: only the spelling of characters inside strings changes.
// encoding/json escapes only U+0000–U+001F (and U+2028, U+2029), and
// protojson only U+0000–U+001F, so a C1 control (U+009B CSI), a
// bidirectional override or a tag character reached the terminal raw.
// Bytes outside strings are copied as they are: JSON's structure is ASCII.
func escapeJSON(b []byte) []byte {
	i := 0
	for i < len(b) && b[i] < utf8.RuneSelf && b[i] != 0x7f {
		i++
	}
	if i == len(b) {
		return b
	}
	out := make([]byte, 0, len(b)+32)
	inString := false
	for i = 0; i < len(b); {
		c := b[i]
		if !inString {
			if c == '"' {
				inString = true
			}
			out = append(out, c)
			i++
			continue
		}
		switch {
		case c == '"':
			inString = false
			out = append(out, c)
			i++
		case c == '\\':
			// An escape: the backslash and the character it escapes
			// (\" \\ \/ \b \f \n \r \t, or the u of \uXXXX, whose
			// digits are ASCII and copied as they come).
			out = append(out, c)
			i++
			if i < len(b) {
				out = append(out, b[i])
				i++
			}
		case c < utf8.RuneSelf && !hiddenRune(rune(c)):
			out = append(out, c)
			i++
		default:
			r, n := utf8.DecodeRune(b[i:]) // a byte that is not UTF-8: utf8.RuneError, 1
			if !hiddenRune(r) {
				out = append(out, b[i:i+n]...)
			} else {
				out = appendUEscape(out, r)
			}
			i += n
		}
	}
	return out
}

const hexDigits = "0123456789abcdef"

// appendUEscape appends r as JSON \uXXXX escapes (lower-case hex, as
// encoding/json writes them), a UTF-16 surrogate pair above U+FFFF.
func appendUEscape(b []byte, r rune) []byte {
	u16 := func(b []byte, v rune) []byte {
		return append(b, '\\', 'u', hexDigits[v>>12&0xf], hexDigits[v>>8&0xf], hexDigits[v>>4&0xf], hexDigits[v&0xf])
	}
	if r > 0xffff {
		r -= 0x10000
		b = u16(b, 0xd800+(r>>10&0x3ff))
		return u16(b, 0xdc00+(r&0x3ff))
	}
	return u16(b, r)
}

// writeJSON writes v to w as JSON (indented by indent when not empty) and a
// newline, HTML characters as they are, hidden characters escaped
// (escapeJSON).
func writeJSON(w io.Writer, v any, indent string) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if indent != "" {
		enc.SetIndent("", indent)
	}
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := w.Write(escapeJSON(buf.Bytes()))
	return err
}
