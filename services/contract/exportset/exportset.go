// Package exportset names the set of operation records an archive holds
// (docs/retention.md): the SHA-256, in lowercase hex, of one line
// "<sequence>\n" per record, in sequence order (a record's sequence is
// unique and never reused, and it is what an archive shows). sharedosctl
// computes it over the records it wrote, the kernel's ledger keeps it with
// the export (RuntimeService.RecordExport, which refuses an export whose
// range holds another set), and the owner's purge function recomputes it
// in SQL before it deletes anything (catalog-svc migration 00018, which
// must compute exactly this): a record that was in flight when its range
// was archived — invisible to the export, committed after — is never
// deleted with that archive, whatever the range's count says.
package exportset

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"strconv"
)

// Digest accumulates the set's digest.
type Digest struct{ h hash.Hash }

// New returns the digest of the empty set, ready to Add to.
func New() *Digest { return &Digest{h: sha256.New()} }

// Add adds one record, by its sequence; records are added in sequence
// order.
func (d *Digest) Add(sequence int64) {
	d.h.Write(append(strconv.AppendInt(nil, sequence, 10), '\n'))
}

// Sum is the digest of the records added so far.
func (d *Digest) Sum() string { return hex.EncodeToString(d.h.Sum(nil)) }
