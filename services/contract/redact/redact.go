package redact

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"path"
	"sort"
	"strings"
)

// MinLen is the shortest string value replaced: shorter ones ("a", "ok")
// would also match ordinary words of the text and carry little.
const MinLen = 4

// Arguments returns text with every occurrence of a string value of the JSON
// arguments — and of its cleaned-path form, which is how values reach
// resources — replaced by "[arg sha256:<12 hex>]". Invalid JSON redacts
// nothing but is not an error: the text then quotes no parsed value.
func Arguments(text string, argsJSON []byte) string {
	if text == "" || len(argsJSON) == 0 {
		return text
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(argsJSON))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return text
	}
	seen := map[string]bool{}
	collect(v, func(s string) {
		for _, form := range []string{s, cleaned(s)} {
			if len(form) >= MinLen {
				seen[form] = true
			}
		}
	})
	values := make([]string, 0, len(seen))
	for s := range seen {
		values = append(values, s)
	}
	// Longest first, so a value is not half-replaced by a shorter one
	// it contains.
	sort.Slice(values, func(i, j int) bool {
		if len(values[i]) != len(values[j]) {
			return len(values[i]) > len(values[j])
		}
		return values[i] < values[j]
	})
	for _, s := range values {
		if strings.Contains(text, s) {
			text = strings.ReplaceAll(text, s, Digest(s))
		}
	}
	return text
}

// ArgumentsDigest is "sha256:<lowercase hex>" of the raw argument bytes: the
// one form operation records and decision logs carry, so either proves the
// arguments authorized are the arguments executed (and they can be joined).
func ArgumentsDigest(argsJSON []byte) string {
	sum := sha256.Sum256(argsJSON)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Digest is the placeholder a redacted value becomes.
func Digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "[arg sha256:" + hex.EncodeToString(sum[:6]) + "]"
}

func cleaned(s string) string {
	return path.Clean("/" + strings.ReplaceAll(s, `\`, "/"))
}

func collect(v any, f func(string)) {
	switch x := v.(type) {
	case string:
		f(x)
	case map[string]any:
		for _, e := range x {
			collect(e, f)
		}
	case []any:
		for _, e := range x {
			collect(e, f)
		}
	}
}
