package catalog

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// checkText refuses text that can hide instructions from a human reviewer
// while a model still reads them (tool poisoning, OWASP MCP03): control
// characters (Unicode Cc) including ANSI escapes, every format character
// (Unicode Cf: bidi overrides and isolates, zero-width characters, Unicode
// tag characters, interlinear annotations, ...), the rest of the tag block
// and the supplementary variation selectors (both used to smuggle invisible
// text). '\n' and '\t' are the only control characters allowed, because
// descriptions are legitimately multi-line; '\r' is refused since it can
// overwrite a line on a terminal. Emoji ZWJ sequences are refused with the
// zero-width joiner: a small price for a simple, complete rule.
func checkText(field, s string) error { return checkTextAllowing(field, s, -1) }

// checkData is checkText for a schema's instance data (enum, const,
// default, examples), which may hold '\r' as a value a tool takes (a line
// ending "\r\n"); nothing else hidden.
func checkData(field, s string) error { return checkTextAllowing(field, s, '\r') }

func checkTextAllowing(field, s string, allowed rune) error {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size <= 1 {
			return invalid(field, RuleUTF8, "byte 0x%02X at byte %d is not valid UTF-8", s[i], i)
		}
		if name, bad := hiddenRune(r); bad && r != allowed {
			return invalid(field, RulePoisoning, "contains U+%04X %s at byte %d (tool-poisoning marker)", r, name, i)
		}
		i += size
	}
	return nil
}

// hiddenRune reports whether r is refused by checkText, and its name.
func hiddenRune(r rune) (string, bool) {
	switch {
	case r == '\n' || r == '\t':
		return "", false
	case r == 0x1B:
		return "ESCAPE (ANSI escape sequence)", true
	case r < 0x20:
		return fmt.Sprintf("CONTROL CHARACTER %s", c0Names[r]), true
	case r == 0x7F:
		return "DELETE", true
	case r == 0x9B:
		return "CONTROL SEQUENCE INTRODUCER (ANSI escape sequence)", true
	case r >= 0x80 && r <= 0x9F:
		return "C1 CONTROL CHARACTER", true
	case r >= 0xE0000 && r <= 0xE007F:
		return "TAG CHARACTER", true
	}
	if name, ok := invisibleNames[r]; ok {
		return name, true
	}
	switch {
	case r >= 0xE0100 && r <= 0xE01EF:
		return "VARIATION SELECTOR SUPPLEMENT CHARACTER", true
	case unicode.Is(unicode.Cf, r):
		return "FORMAT CHARACTER (invisible)", true
	}
	return "", false
}

var c0Names = [0x20]string{
	"NUL", "SOH", "STX", "ETX", "EOT", "ENQ", "ACK", "BEL", "BS", "HT", "LF", "VT", "FF", "CR", "SO", "SI",
	"DLE", "DC1", "DC2", "DC3", "DC4", "NAK", "SYN", "ETB", "CAN", "EM", "SUB", "ESC", "FS", "GS", "RS", "US",
}

// invisibleNames are the bidi controls and zero-width characters refused in
// published text, with their Unicode names for the error message.
var invisibleNames = map[rune]string{
	0x061C: "ARABIC LETTER MARK",
	0x180E: "MONGOLIAN VOWEL SEPARATOR",
	0x200B: "ZERO WIDTH SPACE",
	0x200C: "ZERO WIDTH NON-JOINER",
	0x200D: "ZERO WIDTH JOINER",
	0x200E: "LEFT-TO-RIGHT MARK",
	0x200F: "RIGHT-TO-LEFT MARK",
	0x202A: "LEFT-TO-RIGHT EMBEDDING",
	0x202B: "RIGHT-TO-LEFT EMBEDDING",
	0x202C: "POP DIRECTIONAL FORMATTING",
	0x202D: "LEFT-TO-RIGHT OVERRIDE",
	0x202E: "RIGHT-TO-LEFT OVERRIDE",
	0x2060: "WORD JOINER",
	0x2061: "FUNCTION APPLICATION",
	0x2062: "INVISIBLE TIMES",
	0x2063: "INVISIBLE SEPARATOR",
	0x2064: "INVISIBLE PLUS",
	0x2066: "LEFT-TO-RIGHT ISOLATE",
	0x2067: "RIGHT-TO-LEFT ISOLATE",
	0x2068: "FIRST STRONG ISOLATE",
	0x2069: "POP DIRECTIONAL ISOLATE",
	0xFEFF: "ZERO WIDTH NO-BREAK SPACE",
	0x00AD: "SOFT HYPHEN",
	0xFFF9: "INTERLINEAR ANNOTATION ANCHOR",
	0xFFFA: "INTERLINEAR ANNOTATION SEPARATOR",
	0xFFFB: "INTERLINEAR ANNOTATION TERMINATOR",
}
