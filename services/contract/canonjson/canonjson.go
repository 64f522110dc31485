package canonjson

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxDepth is the deepest nesting of arrays and objects accepted. Tool
// schemas are a few levels deep; the limit bounds recursion on hostile input.
const MaxDepth = 128

// Error kinds, matched with errors.Is.
var (
	ErrSyntax        = errors.New("invalid JSON")
	ErrInvalidUTF8   = errors.New("invalid UTF-8")
	ErrLoneSurrogate = errors.New("lone UTF-16 surrogate")
	ErrDuplicateKey  = errors.New("duplicate object key")
	ErrTooDeep       = errors.New("nesting too deep")
	ErrNumberRange   = errors.New("number outside the IEEE 754 double range")
)

// Error is a refusal to canonicalize, with where and why.
type Error struct {
	Offset int   // byte offset into the input
	Kind   error // one of the Err* values
	Detail string
}

func (e *Error) Error() string {
	return fmt.Sprintf("canonjson: %v at byte %d: %s", e.Kind, e.Offset, e.Detail)
}

func (e *Error) Unwrap() error { return e.Kind }

// Canonicalize returns the RFC 8785 canonical form of the JSON text raw.
func Canonicalize(raw []byte) ([]byte, error) {
	out, err := AppendCanonical(make([]byte, 0, len(raw)), raw)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// AppendCanonical appends the canonical form of raw to dst. On error dst is
// returned unchanged in length.
func AppendCanonical(dst, raw []byte) ([]byte, error) {
	if !utf8.Valid(raw) {
		return dst, &Error{Offset: firstInvalidUTF8(raw), Kind: ErrInvalidUTF8, Detail: "the input is not UTF-8 text"}
	}
	p := parser{in: raw}
	p.skipSpace()
	out, err := p.value(dst)
	if err != nil {
		return dst, err
	}
	p.skipSpace()
	if p.pos != len(raw) {
		return dst, p.errorf(ErrSyntax, "unexpected %s after the top-level value", p.describe())
	}
	return out, nil
}

// Marshal encodes v with encoding/json and canonicalizes the result, so
// HTML escaping, float formatting and map key order all come out as JCS.
func Marshal(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("canonjson: marshal: %w", err)
	}
	return Canonicalize(b)
}

type member struct {
	key      []byte // decoded key; aliases the input when it had no escapes
	keyOff   int    // input offset of the key, for errors
	from, to int    // the member's canonical bytes in the output
}

type parser struct {
	in      []byte
	pos     int
	depth   int
	members []member // a stack shared by nested objects
	scratch []byte   // reused when an object's members are reordered
	strbuf  []byte   // reused to decode escaped strings
}

func (p *parser) errorf(kind error, format string, args ...any) error {
	return &Error{Offset: p.pos, Kind: kind, Detail: fmt.Sprintf(format, args...)}
}

func (p *parser) describe() string {
	if p.pos >= len(p.in) {
		return "end of input"
	}
	r, _ := utf8.DecodeRune(p.in[p.pos:])
	return fmt.Sprintf("character %q", r)
}

func (p *parser) skipSpace() {
	for p.pos < len(p.in) {
		switch p.in[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *parser) value(out []byte) ([]byte, error) {
	if p.pos >= len(p.in) {
		return out, p.errorf(ErrSyntax, "unexpected end of input, want a value")
	}
	switch c := p.in[p.pos]; {
	case c == '{':
		return p.object(out)
	case c == '[':
		return p.array(out)
	case c == '"':
		s, _, err := p.str()
		if err != nil {
			return out, err
		}
		return appendString(out, s), nil
	case c == 't':
		return p.literal(out, "true")
	case c == 'f':
		return p.literal(out, "false")
	case c == 'n':
		return p.literal(out, "null")
	case c == '-' || c >= '0' && c <= '9':
		return p.number(out)
	default:
		return out, p.errorf(ErrSyntax, "unexpected %s, want a value", p.describe())
	}
}

func (p *parser) literal(out []byte, lit string) ([]byte, error) {
	if len(p.in)-p.pos < len(lit) || string(p.in[p.pos:p.pos+len(lit)]) != lit {
		return out, p.errorf(ErrSyntax, "invalid literal, want %s", lit)
	}
	p.pos += len(lit)
	return append(out, lit...), nil
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > MaxDepth {
		return p.errorf(ErrTooDeep, "more than %d nested arrays and objects", MaxDepth)
	}
	return nil
}

func (p *parser) array(out []byte) ([]byte, error) {
	if err := p.enter(); err != nil {
		return out, err
	}
	p.pos++
	out = append(out, '[')
	p.skipSpace()
	if p.pos < len(p.in) && p.in[p.pos] == ']' {
		p.pos++
		p.depth--
		return append(out, ']'), nil
	}
	for {
		var err error
		if out, err = p.value(out); err != nil {
			return out, err
		}
		p.skipSpace()
		if p.pos >= len(p.in) {
			return out, p.errorf(ErrSyntax, "unexpected end of input in array, want ',' or ']'")
		}
		switch p.in[p.pos] {
		case ',':
			p.pos++
			out = append(out, ',')
			p.skipSpace()
		case ']':
			p.pos++
			p.depth--
			return append(out, ']'), nil
		default:
			return out, p.errorf(ErrSyntax, "unexpected %s in array, want ',' or ']'", p.describe())
		}
	}
}

func (p *parser) object(out []byte) ([]byte, error) {
	if err := p.enter(); err != nil {
		return out, err
	}
	p.pos++
	open := len(out)
	out = append(out, '{')
	p.skipSpace()
	if p.pos < len(p.in) && p.in[p.pos] == '}' {
		p.pos++
		p.depth--
		return append(out, '}'), nil
	}
	base := len(p.members)
	for {
		if p.pos >= len(p.in) || p.in[p.pos] != '"' {
			return out, p.errorf(ErrSyntax, "unexpected %s in object, want a string key", p.describe())
		}
		keyOff, from := p.pos, len(out)
		key, escaped, err := p.str()
		if err != nil {
			return out, err
		}
		if escaped {
			key = slices.Clone(key) // strbuf is reused by the next string
		}
		out = appendString(out, key)
		p.skipSpace()
		if p.pos >= len(p.in) || p.in[p.pos] != ':' {
			return out, p.errorf(ErrSyntax, "unexpected %s after object key, want ':'", p.describe())
		}
		p.pos++
		out = append(out, ':')
		p.skipSpace()
		if out, err = p.value(out); err != nil {
			return out, err
		}
		p.members = append(p.members, member{key: key, keyOff: keyOff, from: from, to: len(out)})
		p.skipSpace()
		if p.pos >= len(p.in) {
			return out, p.errorf(ErrSyntax, "unexpected end of input in object, want ',' or '}'")
		}
		if p.in[p.pos] == ',' {
			p.pos++
			out = append(out, ',')
			p.skipSpace()
			continue
		}
		if p.in[p.pos] != '}' {
			return out, p.errorf(ErrSyntax, "unexpected %s in object, want ',' or '}'", p.describe())
		}
		p.pos++
		break
	}
	out, err := p.order(out, open, p.members[base:])
	p.members = p.members[:base]
	p.depth--
	if err != nil {
		return out, err
	}
	return append(out, '}'), nil
}

// order rewrites the members written after out[open] ('{') in UTF-16 key
// order, refusing duplicate keys. Already-ordered members are left in place.
func (p *parser) order(out []byte, open int, ms []member) ([]byte, error) {
	sorted := true
	for i := 1; i < len(ms); i++ {
		switch c := compareUTF16(ms[i-1].key, ms[i].key); {
		case c == 0:
			return out, p.duplicate(ms[i-1], ms[i])
		case c > 0:
			sorted = false
		}
	}
	if sorted {
		return out, nil
	}
	slices.SortFunc(ms, func(a, b member) int { return compareUTF16(a.key, b.key) })
	for i := 1; i < len(ms); i++ {
		if compareUTF16(ms[i-1].key, ms[i].key) == 0 {
			return out, p.duplicate(ms[i-1], ms[i])
		}
	}
	body := open + 1
	p.scratch = append(p.scratch[:0], out[body:]...)
	out = out[:body]
	for i, m := range ms {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, p.scratch[m.from-body:m.to-body]...)
	}
	return out, nil
}

func (p *parser) duplicate(a, b member) error {
	later := max(a.keyOff, b.keyOff)
	return &Error{Offset: later, Kind: ErrDuplicateKey, Detail: fmt.Sprintf("key %q appears more than once in one object", a.key)}
}

// str reads a string at p.pos (which holds '"') and returns its decoded
// bytes. When escaped is false they alias the input; otherwise they alias
// p.strbuf and are valid until the next call.
func (p *parser) str() (s []byte, escaped bool, err error) {
	start := p.pos + 1
	i := start
	for i < len(p.in) {
		c := p.in[i]
		if c == '"' {
			p.pos = i + 1
			return p.in[start:i], false, nil
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			p.pos = i
			return nil, false, p.errorf(ErrSyntax, "control character U+%04X in a string must be escaped", c)
		}
		i++
	}
	buf := append(p.strbuf[:0], p.in[start:i]...)
	for {
		if i >= len(p.in) {
			p.pos = i
			return nil, false, p.errorf(ErrSyntax, "unterminated string")
		}
		c := p.in[i]
		switch {
		case c == '"':
			p.pos = i + 1
			p.strbuf = buf
			return buf, true, nil
		case c < 0x20:
			p.pos = i
			return nil, false, p.errorf(ErrSyntax, "control character U+%04X in a string must be escaped", c)
		case c != '\\':
			buf = append(buf, c)
			i++
			continue
		}
		if i+1 >= len(p.in) {
			p.pos = i
			return nil, false, p.errorf(ErrSyntax, "unterminated escape")
		}
		switch e := p.in[i+1]; e {
		case '"', '\\', '/':
			buf = append(buf, e)
			i += 2
		case 'b':
			buf, i = append(buf, '\b'), i+2
		case 'f':
			buf, i = append(buf, '\f'), i+2
		case 'n':
			buf, i = append(buf, '\n'), i+2
		case 'r':
			buf, i = append(buf, '\r'), i+2
		case 't':
			buf, i = append(buf, '\t'), i+2
		case 'u':
			r, ok := hex4(p.in, i+2)
			if !ok {
				p.pos = i
				return nil, false, p.errorf(ErrSyntax, `\u escape needs four hex digits`)
			}
			switch {
			case utf16.IsSurrogate(r) && r < 0xDC00:
				lo, ok := rune(0), false
				if i+7 < len(p.in) && p.in[i+6] == '\\' && p.in[i+7] == 'u' {
					lo, ok = hex4(p.in, i+8)
				}
				if !ok || lo < 0xDC00 || lo > 0xDFFF {
					p.pos = i
					return nil, false, p.errorf(ErrLoneSurrogate, `high surrogate \u%04x is not followed by a low surrogate`, r)
				}
				buf = utf8.AppendRune(buf, utf16.DecodeRune(r, lo))
				i += 12
			case utf16.IsSurrogate(r):
				p.pos = i
				return nil, false, p.errorf(ErrLoneSurrogate, `low surrogate \u%04x without a high surrogate`, r)
			default:
				buf = utf8.AppendRune(buf, r)
				i += 6
			}
		default:
			p.pos = i
			return nil, false, p.errorf(ErrSyntax, "invalid escape \\%c", e)
		}
	}
}

func hex4(b []byte, at int) (rune, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[at : at+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

func (p *parser) number(out []byte) ([]byte, error) {
	start := p.pos
	i := p.pos
	if p.in[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(p.in) && p.in[i] >= '0' && p.in[i] <= '9' {
			i++
			n++
		}
		return n
	}
	switch {
	case i < len(p.in) && p.in[i] == '0':
		i++
	case digits() == 0:
		p.pos = i
		return out, p.errorf(ErrSyntax, "number needs a digit after '-'")
	}
	plain := true
	if i < len(p.in) && p.in[i] == '.' {
		plain = false
		i++
		if digits() == 0 {
			p.pos = i
			return out, p.errorf(ErrSyntax, "number needs a digit after '.'")
		}
	}
	if i < len(p.in) && (p.in[i] == 'e' || p.in[i] == 'E') {
		plain = false
		i++
		if i < len(p.in) && (p.in[i] == '+' || p.in[i] == '-') {
			i++
		}
		if digits() == 0 {
			p.pos = i
			return out, p.errorf(ErrSyntax, "number needs a digit in the exponent")
		}
	}
	p.pos = i
	text := p.in[start:i]
	// An integer of at most 15 digits is exactly representable and already
	// in ECMAScript form (the grammar forbids leading zeros); only -0 changes.
	if plain && countDigits(text) <= 15 {
		if string(text) == "-0" {
			return append(out, '0'), nil
		}
		return append(out, text...), nil
	}
	f, err := strconv.ParseFloat(string(text), 64)
	if err != nil {
		p.pos = start
		return out, p.errorf(ErrNumberRange, "%s does not fit in a double", text)
	}
	return AppendNumber(out, f), nil
}

func countDigits(text []byte) int {
	if text[0] == '-' {
		return len(text) - 1
	}
	return len(text)
}

// AppendNumber appends f as ECMAScript's Number.prototype.toString writes
// it (ECMA-262 Number::toString), the number form RFC 8785 requires. f must
// be finite; NaN and ±Inf have no JSON form and are written as "null".
func AppendNumber(dst []byte, f float64) []byte {
	switch {
	case math.IsNaN(f) || math.IsInf(f, 0):
		return append(dst, "null"...)
	case f == 0: // +0 and -0 alike
		return append(dst, '0')
	case f < 0:
		dst = append(dst, '-')
		f = -f
	}
	// strconv's shortest round-trip digits are the digits ECMAScript picks
	// (both choose the closest shortest decimal); only the layout differs.
	var buf [32]byte
	e := strconv.AppendFloat(buf[:0], f, 'e', -1, 64) // d[.ddd]e±XX
	var digits [20]byte
	k := 0
	exp := 0
	for j, c := range e {
		if c == 'e' {
			exp, _ = strconv.Atoi(string(e[j+1:]))
			break
		}
		if c != '.' {
			digits[k] = c
			k++
		}
	}
	n := exp + 1 // the decimal point sits after n digits
	ds := digits[:k]
	switch {
	case k <= n && n <= 21:
		dst = append(dst, ds...)
		for range n - k {
			dst = append(dst, '0')
		}
	case 0 < n && n <= 21:
		dst = append(dst, ds[:n]...)
		dst = append(dst, '.')
		dst = append(dst, ds[n:]...)
	case -6 < n && n <= 0:
		dst = append(dst, '0', '.')
		for range -n {
			dst = append(dst, '0')
		}
		dst = append(dst, ds...)
	default:
		dst = append(dst, ds[0])
		if k > 1 {
			dst = append(dst, '.')
			dst = append(dst, ds[1:]...)
		}
		dst = append(dst, 'e')
		if n-1 >= 0 {
			dst = append(dst, '+')
		}
		dst = strconv.AppendInt(dst, int64(n-1), 10)
	}
	return dst
}

// appendString writes decoded string bytes s in JCS form.
func appendString(out, s []byte) []byte {
	const hex = "0123456789abcdef"
	out = append(out, '"')
	start := 0
	for i, c := range s {
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		out = append(out, s[start:i]...)
		switch c {
		case '"':
			out = append(out, '\\', '"')
		case '\\':
			out = append(out, '\\', '\\')
		case '\b':
			out = append(out, '\\', 'b')
		case '\f':
			out = append(out, '\\', 'f')
		case '\n':
			out = append(out, '\\', 'n')
		case '\r':
			out = append(out, '\\', 'r')
		case '\t':
			out = append(out, '\\', 't')
		default:
			out = append(out, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
		}
		start = i + 1
	}
	out = append(out, s[start:]...)
	return append(out, '"')
}

// compareUTF16 orders valid UTF-8 strings as their UTF-16 code unit
// sequences. UTF-8 byte order is code point order, which agrees with UTF-16
// order except where a supplementary character (a surrogate pair,
// 0xD800–0xDBFF first) meets a BMP character at or above U+E000.
func compareUTF16(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	if i == n {
		return cmp.Compare(len(a), len(b))
	}
	// The shared prefix may end inside a character; both strings hold the
	// same lead byte there, so backing up on a finds the start in both.
	for i > 0 && !utf8.RuneStart(a[i]) {
		i--
	}
	ra, _ := utf8.DecodeRune(a[i:])
	rb, _ := utf8.DecodeRune(b[i:])
	if ua, ub := firstUnit(ra), firstUnit(rb); ua != ub {
		return cmp.Compare(ua, ub)
	}
	return cmp.Compare(ra, rb)
}

func firstUnit(r rune) rune {
	if r >= 0x10000 {
		return 0xD800 + (r-0x10000)>>10
	}
	return r
}

func firstInvalidUTF8(b []byte) int {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return len(b)
}
