package jsonlimits

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
