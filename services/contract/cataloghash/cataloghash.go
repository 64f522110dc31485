package cataloghash

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"slices"
	"strings"
)

// Entry is one tool: its canonical name and its cached canonical projection
// (projection.Canonical), which must already be RFC 8785 text.
type Entry struct {
	Name      string
	Canonical []byte
}

func compare(a, b Entry) int {
	return cmp.Or(strings.Compare(a.Name, b.Name), bytes.Compare(a.Canonical, b.Canonical))
}

// Sum returns catalogHash of entries in any order. entries is not modified.
func Sum(entries []Entry) string {
	if slices.IsSortedFunc(entries, compare) {
		return sum(entries)
	}
	sorted := slices.Clone(entries)
	slices.SortFunc(sorted, compare)
	return sum(sorted)
}

// SumSorted returns catalogHash of entries already sorted by name (as a
// catalogue held in name order is). An unsorted input is still hashed
// correctly, by sorting a copy: the check is one comparison per entry,
// small next to hashing a kilobyte per entry, and a wrong hash would be
// silent.
func SumSorted(entries []Entry) string {
	if !slices.IsSortedFunc(entries, compare) {
		return Sum(entries)
	}
	return sum(entries)
}

func sum(sorted []Entry) string {
	h := sha256.New()
	writeArray(h, sorted)
	var d [sha256.Size]byte
	return hex.EncodeToString(h.Sum(d[:0]))
}

// writeArray writes the JCS array of sorted entries. A hash.Hash never
// returns a write error. The punctuation lives in one buffer so the
// interface calls do not allocate per entry.
func writeArray(h hash.Hash, sorted []Entry) {
	punct := []byte("[,]")
	h.Write(punct[0:1])
	for i, e := range sorted {
		if i > 0 {
			h.Write(punct[1:2])
		}
		h.Write(e.Canonical)
	}
	h.Write(punct[2:3])
}

// AppendCanonical appends the canonical catalogue text — the exact bytes
// catalogHash is the SHA-256 of — to dst, for diagnostics and for
// comparing with another implementation.
func AppendCanonical(dst []byte, entries []Entry) []byte {
	sorted := entries
	if !slices.IsSortedFunc(entries, compare) {
		sorted = slices.Clone(entries)
		slices.SortFunc(sorted, compare)
	}
	dst = append(dst, '[')
	for i, e := range sorted {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, e.Canonical...)
	}
	return append(dst, ']')
}
