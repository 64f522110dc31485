package jsonlimits

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// MaxDepth bounds the nesting of arrays and objects in any JSON document
// taken from a request, far below encoding/json's 10,000: deep nesting is a
// cheap DoS on every later parser and on OPA's stack.
const MaxDepth = 64

// MaxArgumentsBytes bounds a tool call's arguments (and any other JSON
// object authz-svc takes from a request).
const MaxArgumentsBytes = 1 << 20

// MaxNumberChars bounds a number's text in the arguments (and annotations)
// authz-svc evaluates: OPA compares numbers exactly, and one of a million
// digits took seconds to compare — past the evaluation's deadline, which
// cannot interrupt a built-in. The kernel refuses a longer one as invalid
// arguments, so a model's number never reaches authz-svc to fail there.
const MaxNumberChars = 128

// MaxNumberExponent bounds a number's exponent as written (leading zeros
// aside): three digits. Within MaxNumberChars a number a double holds is
// written with an exponent of at most about ±450, so this refuses only
// zeros written with a huge exponent (0e-999999), which a reader that
// keeps the exponent (Java's BigDecimal, say) could expand.
const MaxNumberExponent = 999

// CheckNumber says why the JSON number whose text is n (JSON's number
// grammar, as a decoder hands it over) is refused wherever SharedOS takes
// one — a tool's arguments, a tool's structuredContent — or nil. A number
// is taken when it is at most MaxNumberChars long, its exponent as
// written is at most MaxNumberExponent in magnitude, and a double reads it
// as the number it is (IEEE 754 binary64, rounded to nearest, as
// strconv.ParseFloat, JavaScript's Number and Python's float read it):
// not beyond ±1.7976931348623157e308, which reads as ±Inf, and not so
// close to 0 (below about 2.5e-324 in magnitude) that it reads as 0 while
// it is not 0. Within those bounds an integer or a decimal is taken as
// written, every digit kept (a double reader rounds it to a nearby
// double, never to 0 or infinity).
//
// The exact readers are why: a JSON Schema validator (santhosh-tekuri's
// converts each number it checks to a big.Rat) spent 25 ms on one
// 1e-999999 and panicked on 1e-1000001, and 1e-400 passed
// "exclusiveMinimum": 0 as more than 0, where every double reader reads 0.
// The check costs a length and a scan for an exponent; only a number with
// one is parsed.
func CheckNumber(n string) error {
	if len(n) > MaxNumberChars {
		return fmt.Errorf("a number of %d characters; the limit is %d", len(n), MaxNumberChars)
	}
	e := exponentAt(n)
	if e < 0 {
		// At most MaxNumberChars characters and no exponent: 0, or between
		// 1e-126 and 1e128 in magnitude, which a double holds.
		return nil
	}
	exp := strings.TrimLeft(strings.TrimLeft(n[e+1:], "+-"), "0") // "" for 0
	if v, err := strconv.Atoi(exp); len(exp) > 4 || err == nil && v > MaxNumberExponent {
		return fmt.Errorf("a number whose exponent is beyond ±%d", MaxNumberExponent)
	}
	f, _ := strconv.ParseFloat(n, 64) // valid grammar: only ErrRange, with ±Inf
	switch {
	case math.IsInf(f, 0):
		return errors.New("a number beyond a double's range (±1.8e308): a double reads it as infinite")
	case f == 0 && strings.ContainsAny(n[:e], "123456789"):
		return errors.New("a number so close to 0 that a double reads it as 0 (below about 2.5e-324) though it is not 0")
	}
	return nil
}

// MaxArgumentValues and MaxArgumentContainers bound the JSON values of a
// call's arguments (and of any other JSON object authz-svc takes from a
// request), and among them the objects and arrays; keys are not values.
// Each value becomes an OPA value in authz-svc, about 150 bytes apiece and
// 300 to 900 for an object or array, where a string costs about its bytes:
// 1 MiB of {"x":{}} elements cost 112 MB and 173 ms to parse, 1 MiB of
// ones 78 MB. Within them, a megabyte of text, ten thousand paths or a
// table of 5,000 rows of ten fields fit. The bridge's bound on a request's
// params (262,144 values, 65,536 objects and arrays) is wider: the kernel
// refuses arguments past these as invalid arguments, so they never reach
// authz-svc to fail there.
const (
	MaxArgumentValues     = 1 << 16
	MaxArgumentContainers = 1 << 14
)

// Shape is the size of a JSON document as Measure counts it.
type Shape struct {
	// Depth is the deepest nesting of objects and arrays.
	Depth int
	// Values counts the document's values at every level, objects and
	// arrays included, keys not.
	Values int
	// Containers counts its objects and arrays.
	Containers int
}

// Exceeds reports whether s passes a positive bound of limit.
func (s Shape) Exceeds(limit Shape) bool {
	return limit.Depth > 0 && s.Depth > limit.Depth ||
		limit.Values > 0 && s.Values > limit.Values ||
		limit.Containers > 0 && s.Containers > limit.Containers
}

// Measure returns the Shape of raw in one scan of its bytes, skipping string
// contents, and stops at the first bound of limit passed (a bound of zero
// does not stop it), so a hostile document costs one short scan. Only what
// it counts of valid JSON means anything (json.Valid tells): the values of
// a container are separated by commas, so every value but the document is
// a non-empty container's first or follows a comma.
func Measure(raw []byte, limit Shape) Shape {
	s := Shape{Values: 1}
	d := 0
	inString, escaped, opened := false, false, false
	for _, c := range raw {
		switch {
		case escaped:
			escaped = false
			continue
		case inString:
			escaped = c == '\\'
			inString = c != '"'
			continue
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			continue
		}
		grew := opened && c != '}' && c != ']'
		if grew {
			s.Values++
		}
		opened = false
		switch c {
		case '"':
			inString = true
		case '{', '[':
			s.Containers++
			opened, grew = true, true
			if d++; d > s.Depth {
				s.Depth = d
			}
		case '}', ']':
			d--
		case ',':
			s.Values++
			grew = true
		}
		if grew && s.Exceeds(limit) {
			return s
		}
	}
	return s
}

// Scan returns the deepest nesting of objects and arrays in raw, skipping
// string contents. It stops at the first level past limit (limit <= 0 scans
// everything), so a hostile document costs one short scan. balanced reports
// that the whole input was scanned and every bracket closed outside a
// string; it says nothing else about validity (json.Valid does).
func Scan(raw []byte, limit int) (depth int, balanced bool) {
	d, maxD := 0, 0
	inString, escaped := false, false
	for _, c := range raw {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			d++
			if d > maxD {
				maxD = d
				if limit > 0 && maxD > limit {
					return maxD, false
				}
			}
		case '}', ']':
			d--
			if d < 0 {
				return maxD, false
			}
		}
	}
	return maxD, d == 0 && !inString
}

// RepeatsKey reports whether raw, valid JSON that decoded to doc (objects
// as map[string]any, arrays as []any, at any depth), repeats a key in one
// object. Decoders keep one of the two — encoding/json the last, others
// the first — so whoever reads such a document may read another value
// than the one checked. One pass over the bytes: outside strings a colon
// only ever separates a key from its value, and a decoded object has one
// entry per distinct key.
func RepeatsKey(raw []byte, doc any) bool {
	return members(raw) != entries(doc)
}

// members counts the members of every object in raw (valid JSON).
func members(raw []byte) int {
	n := 0
	inString, escaped := false, false
	for _, c := range raw {
		switch {
		case escaped:
			escaped = false
		case inString:
			escaped = c == '\\'
			inString = c != '"'
		case c == '"':
			inString = true
		case c == ':':
			n++
		}
	}
	return n
}

// entries counts the entries of every object in doc.
func entries(doc any) int {
	n := 0
	switch x := doc.(type) {
	case map[string]any:
		n = len(x)
		for _, e := range x {
			n += entries(e)
		}
	case []any:
		for _, e := range x {
			n += entries(e)
		}
	}
	return n
}

// exponentAt is the index of the 'e' or 'E' in the JSON number n, or -1:
// a byte loop, as a number's other bytes (digits, "+-.") never fold to 'e'.
func exponentAt(n string) int {
	for i := 0; i < len(n); i++ {
		if n[i]|0x20 == 'e' {
			return i
		}
	}
	return -1
}
