package mcpcontent

import (
	"encoding/base64"
	"errors"
	"fmt"
)

// errNotBase64 is the error of a member MCP types as base64 (an image's or
// audio's data, a resource's blob) that base64.StdEncoding does not
// decode: a client that decodes it fails on the result.
var errNotBase64 = errors.New("not base64 (RFC 4648, standard alphabet, padded)")

// b64chunk is how many base64 characters are decoded at once: a multiple
// of 4, so that every chunk but the last is whole quanta.
const b64chunk = 4096

// base64Checker decodes base64 a chunk at a time into a buffer of its own,
// to learn whether base64.StdEncoding takes the whole text, without a copy
// of it. Like StdEncoding it skips '\r' and '\n' wherever they stand.
type base64Checker struct {
	src    [b64chunk]byte
	dst    [b64chunk / 4 * 3]byte
	n      int  // bytes in src
	padded bool // a decoded chunk ended in padding: nothing may follow
	bad    bool
}

// add takes the next character of the text.
func (c *base64Checker) add(b byte) {
	if b == '\r' || b == '\n' || c.bad {
		return
	}
	if c.padded {
		c.bad = true // data after the padding that ended a chunk
		return
	}
	c.src[c.n] = b
	c.n++
	if c.n == len(c.src) {
		c.flush()
	}
}

// flush decodes what src holds.
func (c *base64Checker) flush() {
	if c.n == 0 {
		return
	}
	if _, err := base64.StdEncoding.Decode(c.dst[:], c.src[:c.n]); err != nil {
		c.bad = true
	}
	c.padded = c.src[c.n-1] == '='
	c.n = 0
}

// valid is whether the text taken was base64.
func (c *base64Checker) valid() bool {
	c.flush()
	return !c.bad
}

// checkBase64 checks s, a decoded string, as base64.
func checkBase64(s string) error {
	var c base64Checker
	for i := 0; i < len(s); i++ {
		c.add(s[i])
	}
	if !c.valid() {
		return errNotBase64
	}
	return nil
}

// checkBase64Literal checks lit, a JSON string literal with its quotes as
// encoding/json hands it to an Unmarshaler (so well formed), as the base64
// text it stands for: escapes are read as they come ("\/" is '/', a
// "\u" escape the character it names), none of them kept.
func checkBase64Literal(lit []byte) error {
	if len(lit) < 2 || lit[0] != '"' {
		return fmt.Errorf("%w: %.20s", errNotString, lit)
	}
	var c base64Checker
	body := lit[1 : len(lit)-1]
	for i := 0; i < len(body); i++ {
		b := body[i]
		if b == '\\' && i+1 < len(body) {
			i++
			switch body[i] {
			case 'u':
				if i+4 >= len(body) {
					return errNotBase64
				}
				var r int
				for _, h := range body[i+1 : i+5] {
					r = r<<4 | hexValue(h)
				}
				i += 4
				if r >= 0x80 {
					return errNotBase64 // no base64 character, nor a line break
				}
				b = byte(r)
			case 'n':
				b = '\n'
			case 'r':
				b = '\r'
			case '/':
				b = '/'
			default: // '"', '\\', backspace, form feed and tab are no base64
				return errNotBase64
			}
		}
		c.add(b)
	}
	if !c.valid() {
		return errNotBase64
	}
	return nil
}

// hexValue is the value of the hex digit h (encoding/json has checked it
// is one).
func hexValue(h byte) int {
	switch {
	case '0' <= h && h <= '9':
		return int(h - '0')
	case 'a' <= h && h <= 'f':
		return int(h-'a') + 10
	case 'A' <= h && h <= 'F':
		return int(h-'A') + 10
	}
	return 0
}
