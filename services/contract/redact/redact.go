package redact

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"math"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MinLen is the shortest string value replaced wherever it occurs; shorter
// strings, numbers and booleans ("ab", 4111222333, true) are replaced only
// where they stand as a whole token (no letter or digit on either side), so
// they do not eat into ordinary words of the text.
const MinLen = 4

// Arguments returns text with every occurrence of a value of the JSON
// arguments — strings and their cleaned-path form, which is how values
// reach resources, numbers and booleans, and keys that read as data (see
// KeysAndValuesOf) — replaced by "[arg sha256:<12 hex>]". A text past
// MaxText, or of arguments of more than MaxValues values, is replaced whole
// by its length and digest. Invalid JSON redacts nothing but is not an
// error: the text then quotes no parsed value. To redact several texts of
// one call, collect the values once with KeysAndValuesOf.
func Arguments(text string, argsJSON []byte) string {
	if text == "" || len(argsJSON) == 0 {
		return text
	}
	return KeysAndValuesOf(argsJSON).Redact(text)
}

// Values are the values of one call's JSON arguments, collected once (see
// Arguments) — with KeysAndValuesOf their keys too, with With more values.
type Values struct {
	// long are strings of at least MinLen bytes, replaced wherever they
	// occur; tokens the rest, replaced where they stand as a whole token.
	// In no order: Redact replaces every occurrence found, overlaps merged.
	long, tokens []string
	// tooMany: the arguments hold more than MaxValues values, none
	// collected; every text is replaced whole.
	tooMany bool
}

// MaxValues bounds the values (strings, numbers, booleans, nulls and keys)
// read from one call's arguments: past it reading stops and every text is
// replaced whole, as one past MaxText is. Each value read costs its forms
// (up to seven) before any text is searched, on every call: 1 MiB of
// ~130,000 short strings took 0.4 s per call in authz-svc, outside its
// evaluation's deadline.
const MaxValues = 4096

// ValuesOf collects the values of argsJSON; invalid or empty JSON has none.
func ValuesOf(argsJSON []byte) Values { return valuesOf(argsJSON, false) }

// KeysAndValuesOf is ValuesOf that also collects the keys of every object, at
// any depth, that are not names (IsName), as string values (MinLen
// applies alike), also as a JSON Pointer writes them (RFC 6901: "~1" for
// "/"), which is how a schema error's location quotes them: a key can carry
// data — a path or an address used as a key. A name ("path", "max_results")
// is the schema's, and stays readable wherever the text says it, so a
// schema error keeps its location ("at /limit").
func KeysAndValuesOf(argsJSON []byte) Values { return valuesOf(argsJSON, true) }

// valuesOf reads argsJSON's first JSON value token by token, so that it
// stops at the value past MaxValues without decoding the rest.
func valuesOf(argsJSON []byte, keys bool) Values {
	if len(argsJSON) == 0 {
		return Values{}
	}
	dec := json.NewDecoder(bytes.NewReader(argsJSON))
	dec.UseNumber()
	c := newCollector()
	var objects []bool // per open container: is it an object
	key := false       // the next string is a key
	read := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return Values{}
		}
		if d, ok := tok.(json.Delim); ok {
			if d == '{' || d == '[' {
				objects = append(objects, d == '{')
			} else {
				objects = objects[:len(objects)-1]
			}
		} else {
			if read++; read > MaxValues {
				return Values{tooMany: true}
			}
			if key {
				if k := tok.(string); keys && !IsName(k) {
					c.add(k, true)
					if p := PointerToken(k); p != k {
						c.add(p, true)
					}
				}
				key = false
				continue
			}
			collect(tok, c.add)
		}
		if len(objects) == 0 {
			return c.values()
		}
		// In an object, a key comes after its opening and after each value.
		key = objects[len(objects)-1]
	}
}

// With returns v and every s collected as a string value: something the
// model chose outside the arguments, such as the URI of a resources/read,
// is redacted as if it were one of them.
func (v Values) With(s ...string) Values {
	if v.tooMany {
		return v
	}
	c := newCollector()
	for _, form := range v.long {
		c.long[form] = true
	}
	for _, form := range v.tokens {
		c.tokens[form] = true
	}
	for _, x := range s {
		c.add(x, true)
	}
	return c.values()
}

// collector gathers the forms of values, each once.
type collector struct{ long, tokens map[string]bool }

func newCollector() collector {
	return collector{long: map[string]bool{}, tokens: map[string]bool{}}
}

// add collects s: a string (str true) with the forms it takes in text, or a
// number or boolean as its JSON text.
func (c collector) add(s string, str bool) {
	forms := []string{s}
	if str {
		// As a path once cleaned (how values reach resources), and as
		// a quoted string shows it escaped (a policy's sprintf of a
		// collection writes JSON, a Go error strconv.Quote).
		forms = append(forms, cleaned(s), quotedInside(s), jsonInside(s))
	}
	for _, form := range forms {
		switch {
		case str && len(form) >= MinLen:
			c.long[form] = true
		case form != "":
			c.tokens[form] = true
		}
	}
}

func (c collector) values() Values {
	return Values{long: slices.Collect(maps.Keys(c.long)), tokens: slices.Collect(maps.Keys(c.tokens))}
}

// MaxText is the longest text Redact searches: a longer one — a policy
// reason that quotes whole arguments — is replaced whole by its length and
// digest. Redacting reads the text once per value, and arguments may hold
// a million values: one reason quoting 1 MiB of them took minutes.
const MaxText = 4096

// maxSearch bounds the bytes Redact reads in all (the text's length once per
// value): past it the text is replaced whole too, so a call with very many
// values costs at most a few tens of milliseconds per text.
const maxSearch = 1 << 26

// Redact returns text with the values replaced (see Arguments): every
// occurrence of a value in text as it was given, in one pass — a
// placeholder is never searched again (a value could be found inside
// another's digest, and the text grew with each). Occurrences that overlap
// are replaced together, by the digest of what they cover: no part of
// either is left.
//
// A piece of a value quoted without the rest is replaced too (see pieces):
// a policy's reason built from a path's last segment, an error quoting
// what it could not parse of a value.
func (v Values) Redact(text string) string { return v.redact(text, true) }

// RedactValues is Redact without pieces: for a text made to be recorded,
// which quotes no value but names the schema's own words (a schema
// violation's location and keyword), which a value may also hold.
func (v Values) RedactValues(text string) string { return v.redact(text, false) }

func (v Values) redact(text string, withPieces bool) string {
	if text == "" {
		return text
	}
	if len(text) > MaxText || v.tooMany || len(text)*(len(v.long)+len(v.tokens)) > maxSearch {
		return whole(text)
	}
	var pieces [][2]int
	if withPieces {
		var ok bool
		if pieces, ok = v.pieces(text); !ok {
			return whole(text)
		}
	}
	type span struct{ start, end int }
	var found []span
	each := func(s string, whole bool) {
		if len(s) > len(text) {
			return
		}
		for at := 0; ; {
			i := strings.Index(text[at:], s)
			if i < 0 {
				return
			}
			start, end := at+i, at+i+len(s)
			before, _ := utf8.DecodeLastRuneInString(text[:start])
			after, _ := utf8.DecodeRuneInString(text[end:])
			if !whole || !wordRune(before) && !wordRune(after) {
				found = append(found, span{start, end})
			}
			at = start + 1
		}
	}
	for _, s := range v.long {
		each(s, false)
	}
	for _, s := range v.tokens {
		each(s, true)
	}
	for _, p := range pieces {
		found = append(found, span{p[0], p[1]})
	}
	if len(found) == 0 {
		return text
	}
	sort.Slice(found, func(i, j int) bool {
		if found[i].start != found[j].start {
			return found[i].start < found[j].start
		}
		return found[i].end > found[j].end
	})
	var b strings.Builder
	at := 0
	for k := 0; k < len(found); {
		cur := found[k]
		for k++; k < len(found) && found[k].start < cur.end; k++ {
			cur.end = max(cur.end, found[k].end)
		}
		b.WriteString(text[at:cur.start])
		b.WriteString(Digest(text[cur.start:cur.end]))
		at = cur.end
	}
	b.WriteString(text[at:])
	return b.String()
}

// pieces are the spans of text that quote a piece of a string value or a
// data key rather than the whole: a policy's reason built from a path's
// last segment, a Go error quoting the rest of a value it could not parse.
// A piece is a run of letters, digits and "_-.~+=@" (a word, a path
// segment, a token), that run with its ends' marks trimmed, or one of its
// runs of letters and digits — of at least MinLen bytes. A piece of the
// text is a span when a value holds it as a word (no letter or digit on
// either side: "read" in "read me", not in "readme") or as the end of a
// word with a digit ("password" of "01Tpassword"), or holds it at all when it
// reads as data: it has a digit, or is at least dataLen bytes
// ("S3CR3TTOKEN99", cut from "2024-01-01TS3CR3TTOKEN99" by a parser).
// So a record loses an ordinary word a value also holds as a word, never a
// piece of a value that reads as data. Searching reads the values once per
// piece: past maxSearch, not ok (the whole text goes).
func (v Values) pieces(text string) (_ [][2]int, ok bool) {
	if len(v.long) == 0 {
		return nil, true
	}
	var buf [16][2]int
	spans := appendPieces(buf[:0], text)
	if len(spans) == 0 {
		return nil, true
	}
	size := 0
	for _, r := range v.long {
		size += len(r)
	}
	// A piece the text repeats is searched once (a long reason repeats
	// its words): memo holds 1 found, -1 not, 0 not searched yet. A short
	// text's few pieces are searched as they come.
	var memo map[string]int8
	searches := len(spans)
	if len(spans) > 8 {
		memo = make(map[string]int8, len(spans))
		for _, sp := range spans {
			memo[text[sp[0]:sp[1]]] = 0
		}
		searches = len(memo)
	}
	if searches*size > maxSearch {
		return nil, false
	}
	var out [][2]int
	for _, sp := range spans {
		p := text[sp[0]:sp[1]]
		var hit bool
		switch memo[p] {
		case 1:
			hit = true
		case 0:
			hit = v.holdPiece(p)
			if memo != nil {
				memo[p] = -1
				if hit {
					memo[p] = 1
				}
			}
		}
		if hit {
			out = append(out, sp)
		}
	}
	return out, true
}

// holdPiece tells whether a value holds the piece p (see pieces).
func (v Values) holdPiece(p string) bool {
	anywhere := len(p) >= dataLen || strings.ContainsAny(p, "0123456789")
	for _, r := range v.long {
		if holds(r, p, anywhere) {
			return true
		}
	}
	return false
}

// dataLen is the length from which a piece of text found anywhere inside a
// value is taken for a piece of it.
const dataLen = 10

// holds tells whether s holds p anywhere or, unless anywhere, as a word —
// or as the end of a word of s that has a digit, what a parser quotes of a
// value it could not read ("TVALUE" of "S3CR3TVALUE", "password" of
// "01Tpassword"): a word that reads as data. Not its start or middle:
// "user" of "user42" stays a word of the text.
func holds(s, p string, anywhere bool) bool {
	plain := !strings.ContainsAny(p, pieceMarks)
	for at := 0; at+len(p) <= len(s); {
		i := strings.Index(s[at:], p)
		if i < 0 {
			return false
		}
		start, end := at+i, at+i+len(p)
		if anywhere {
			return true
		}
		ws, we := start, end // the word of s around p
		for ws > 0 {
			if c := s[ws-1]; c < utf8.RuneSelf {
				if !asciiWord[c] {
					break
				}
				ws--
				continue
			}
			r, n := utf8.DecodeLastRuneInString(s[:ws])
			if !wordRune(r) {
				break
			}
			ws -= n
		}
		for we < len(s) {
			if c := s[we]; c < utf8.RuneSelf {
				if !asciiWord[c] {
					break
				}
				we++
				continue
			}
			r, n := utf8.DecodeRuneInString(s[we:])
			if !wordRune(r) {
				break
			}
			we += n
		}
		if ws == start && we == end {
			return true
		}
		// What a parser quotes of a value is its rest: p ends the word.
		if hasDigit(s[ws:we]) && (we == end || plain && strings.HasSuffix(s[ws:we], p)) {
			return true
		}
		at = start + 1
		if plain {
			at = we // a later p starting inside this word is inside it too
		}
	}
	return false
}

// appendPieces appends the span of every piece of s (see pieces) to dst.
func appendPieces(dst [][2]int, s string) [][2]int {
	piece := func(start, end int) {
		if end-start >= MinLen {
			dst = append(dst, [2]int{start, end})
		}
	}
	for i := 0; i < len(s); {
		r, n := runeAt(s, i)
		if !pieceRune(r) {
			i += n
			continue
		}
		start, marks := i, false
		for i < len(s) {
			r, n := runeAt(s, i)
			if !pieceRune(r) {
				break
			}
			marks = marks || !wordRune(r)
			i += n
		}
		if i-start < MinLen {
			continue
		}
		piece(start, i)
		if !marks {
			continue
		}
		run := s[start:i]
		if t := strings.Trim(run, pieceMarks); len(t) != len(run) && t != "" {
			at := start + strings.Index(run, t)
			piece(at, at+len(t))
		}
		for j := start; j < i; {
			r, n := runeAt(s, j)
			if !wordRune(r) {
				j += n
				continue
			}
			k := j
			for k < i {
				r, n := runeAt(s, k)
				if !wordRune(r) {
					break
				}
				k += n
			}
			piece(j, k)
			j = k
		}
	}
	return dst
}

// hasDigit tells whether s has an ASCII digit.
func hasDigit(s string) bool {
	for i := 0; i < len(s); i++ {
		if '0' <= s[i] && s[i] <= '9' {
			return true
		}
	}
	return false
}

// asciiWord marks the ASCII letters and digits.
var asciiWord = func() (t [utf8.RuneSelf]bool) {
	for c := range utf8.RuneSelf {
		t[c] = wordRune(rune(c))
	}
	return t
}()

// runeAt is the rune at s[i] and its length, ASCII read without decoding.
func runeAt(s string, i int) (rune, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), 1
	}
	return utf8.DecodeRuneInString(s[i:])
}

// pieceMarks are the marks a piece may hold besides letters and digits.
const pieceMarks = "_-.~+=@"

func pieceRune(r rune) bool {
	switch r {
	case '_', '-', '.', '~', '+', '=', '@':
		return true
	}
	return wordRune(r)
}

// whole is the placeholder of a text redacted whole.
func whole(text string) string {
	sum := sha256.Sum256([]byte(text))
	return "[text of " + strconv.Itoa(len(text)) + " bytes, redacted whole: sha256:" + hex.EncodeToString(sum[:6]) + "]"
}

func wordRune(r rune) bool {
	if r < utf8.RuneSelf {
		return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9'
	}
	return r != utf8.RuneError && (unicode.IsLetter(r) || unicode.IsDigit(r))
}

// ArgumentsDigest is SHA256 of the raw argument bytes: the form operation
// records and decision logs carry, so either proves the arguments
// authorized are the arguments executed (and they can be joined).
func ArgumentsDigest(argsJSON []byte) string { return SHA256(argsJSON) }

// SHA256 is "sha256:<lowercase hex>" of b: the one digest form records,
// decision logs and a run's SystemIdentity carry.
func SHA256(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Digest is the placeholder a redacted value becomes.
func Digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "[arg sha256:" + hex.EncodeToString(sum[:6]) + "]"
}

// quotedInside is s as strconv.Quote writes it, without the quotes.
func quotedInside(s string) string {
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

// jsonInside is s as encoding/json writes it, without the quotes.
func jsonInside(s string) string {
	b, _ := json.Marshal(s) // a string always marshals
	return string(b[1 : len(b)-1])
}

func cleaned(s string) string {
	return path.Clean("/" + strings.ReplaceAll(s, `\`, "/"))
}

// IsName reports whether the key k reads as a name as schemas give their
// properties — at most maxNameLen ASCII letters, digits, '_' and '-',
// beginning with a letter or '_', no run of more than three digits — not
// as data used as a key (a path, an account number, a token). A user name
// used as a key ("alice-smith") still reads as one.
func IsName(k string) bool {
	if k == "" || len(k) > maxNameLen || !(isLetter(k[0]) || k[0] == '_') {
		return false
	}
	digits := 0
	for i := range len(k) {
		c := k[i]
		switch {
		case c >= '0' && c <= '9':
			if digits++; digits > 3 {
				return false
			}
			continue
		case !isLetter(c) && c != '_' && c != '-':
			return false
		}
		digits = 0
	}
	return true
}

// PointerToken is tok as a JSON Pointer writes it (RFC 6901: "~0" for
// "~", "~1" for "/"): the form a schema error's location quotes a key in,
// which KeysAndValuesOf collects too.
func PointerToken(tok string) string { return pointerEscaper.Replace(tok) }

var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// maxNameLen bounds a key that reads as a property name: a longer one is
// more likely a token.
const maxNameLen = 32

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// numberForms are the ways a policy, a provider or a library renders the
// number n: its JSON text and, for one of at least MinLen bytes (an
// identifier, an amount — not a count or a flag), as a float64: plain
// where JavaScript and Python write it plainly (1e-7 ≤ |n| < 1e21), in
// exponent form (Go's %v and %g, JavaScript's with no leading zero in the
// exponent) and, when integral, with ".0" (Python's float). Each form is
// at most a few dozen bytes, so a long argument of numbers cannot multiply
// into megabytes of forms. A rendering with a chosen precision ("%.2f") is
// not among them.
func numberForms(n json.Number) []string {
	text := n.String()
	forms := []string{text}
	if len(text) < MinLen {
		return forms
	}
	f, err := n.Float64()
	mantissa, _, _ := strings.Cut(strings.ToLower(text), "e")
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) || (f == 0 && strings.ContainsAny(mantissa, "123456789")) {
		return forms // beyond float64, or so small it reads as 0: no other rendering
	}
	exp := strconv.FormatFloat(f, 'e', -1, 64)
	mant, e, _ := strings.Cut(exp, "e")
	sign, digits := e[:1], strings.TrimLeft(e[1:], "0")
	if digits == "" {
		digits = "0"
	}
	forms = append(forms, exp, strings.ToUpper(exp), mant+"e"+sign+digits)
	if sign == "+" {
		forms = append(forms, mant+"e"+digits)
	}
	if a := math.Abs(f); a == 0 || (a >= 1e-7 && a < 1e21) {
		plain := strconv.FormatFloat(f, 'f', -1, 64)
		forms = append(forms, plain)
		if !strings.Contains(plain, ".") {
			forms = append(forms, plain+".0")
		}
	}
	return forms
}

// collect calls f with the scalar v: a string (str true), or a number or
// boolean as its JSON text.
func collect(v any, f func(s string, str bool)) {
	switch x := v.(type) {
	case string:
		f(x, true)
	case json.Number:
		for _, form := range numberForms(x) {
			f(form, false)
		}
	case bool:
		f(strconv.FormatBool(x), false)
	}
}
