package jsondepth

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
