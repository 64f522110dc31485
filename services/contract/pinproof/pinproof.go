package pinproof

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/mod/sumdb/tlog"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
)

// Kinds of pinned entry.
const (
	Tool   = "tool"
	Prompt = "prompt"
)

// Tree is the Merkle tree over one turn's pinned tools and prompts.
type Tree struct {
	stored []tlog.Hash
	index  map[string]int64
	digest []string
	root   tlog.Hash
}

// leaf is a pinned entry's record: its kind, name and digest,
// NUL-separated (a tool or prompt name never holds a NUL: ToolNameSchema).
func leaf(kind, name, digest string) []byte {
	return []byte(kind + "\x00" + name + "\x00" + digest)
}

// Build returns the tree over the pinned tools and prompts (name → digest).
func Build(tools, prompts map[string]string) (*Tree, error) {
	type entry struct{ kind, name, digest string }
	entries := make([]entry, 0, len(tools)+len(prompts))
	for n, d := range tools {
		entries = append(entries, entry{Tool, n, d})
	}
	for n, d := range prompts {
		entries = append(entries, entry{Prompt, n, d})
	}
	slices.SortFunc(entries, func(a, b entry) int {
		if a.kind != b.kind {
			return strings.Compare(a.kind, b.kind)
		}
		return strings.Compare(a.name, b.name)
	})
	t := &Tree{index: make(map[string]int64, len(entries)), digest: make([]string, len(entries))}
	for i, e := range entries {
		hs, err := tlog.StoredHashes(int64(i), leaf(e.kind, e.name, e.digest), t)
		if err != nil {
			return nil, err
		}
		t.stored = append(t.stored, hs...)
		t.index[e.kind+"\x00"+e.name], t.digest[i] = int64(i), e.digest
	}
	root, err := tlog.TreeHash(int64(len(entries)), t)
	if err != nil {
		return nil, err
	}
	t.root = root
	return t, nil
}

// ReadHashes implements tlog.HashReader over the tree's stored hashes.
func (t *Tree) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, x := range indexes {
		if x < 0 || x >= int64(len(t.stored)) {
			return nil, fmt.Errorf("pinproof: stored hash %d of %d", x, len(t.stored))
		}
		out[i] = t.stored[x]
	}
	return out, nil
}

// Root is the tree's hash (what the grant signs), in tlog's base64 form.
func (t *Tree) Root() string { return t.root.String() }

// Size is the number of pinned entries.
func (t *Tree) Size() int64 { return int64(len(t.digest)) }

// Prove returns the pinned digest of the entry (kind Tool or Prompt) and
// its inclusion proof; false when it is not pinned.
func (t *Tree) Prove(kind, name string) (*sharedosv1.PinProof, bool) {
	i, ok := t.index[kind+"\x00"+name]
	if !ok {
		return nil, false
	}
	p, err := tlog.ProveRecord(t.Size(), i, t)
	if err != nil {
		return nil, false
	}
	out := &sharedosv1.PinProof{Index: i, Digest: t.digest[i], Hashes: make([][]byte, len(p))}
	for k, h := range p {
		out.Hashes[k] = h[:]
	}
	return out, true
}

// ErrNotPinned: the call carries no proof, or one that does not prove its
// tool pinned under the grant's root.
var ErrNotPinned = errors.New("not in this turn's pinned catalogue")

// Check returns the digest proof pins the entry (kind Tool or Prompt) under
// root (Root) in a tree of size n; ErrNotPinned otherwise.
func Check(root string, n int64, kind, name string, proof *sharedosv1.PinProof) (string, error) {
	if proof == nil || proof.GetIndex() < 0 || proof.GetIndex() >= n {
		return "", ErrNotPinned
	}
	th, err := tlog.ParseHash(root)
	if err != nil {
		return "", ErrNotPinned
	}
	p := make(tlog.RecordProof, len(proof.GetHashes()))
	for i, h := range proof.GetHashes() {
		if len(h) != tlog.HashSize {
			return "", ErrNotPinned
		}
		copy(p[i][:], h)
	}
	if tlog.CheckRecord(p, n, th, proof.GetIndex(), tlog.RecordHash(leaf(kind, name, proof.GetDigest()))) != nil {
		return "", ErrNotPinned
	}
	return proof.GetDigest(), nil
}
