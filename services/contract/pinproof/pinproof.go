package pinproof

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/mod/sumdb/tlog"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/resourceuri"
)

// Kinds of pinned entry.
const (
	Tool   = "tool"
	Prompt = "prompt"
	// Resource is a concrete resource URI; URI templates are not leaves
	// (a URI is read by the first template it matches, a rule over all of
	// them: the grant lists them).
	Resource = "resource"
)

// Tree is the Merkle tree over one turn's pinned tools and prompts, or over
// its concrete resource URIs. Leaves are in key order (key: kind, NUL,
// name), so a key that is not a leaf sits between two adjacent ones.
type Tree struct {
	stored []tlog.Hash
	keys   []string // sorted
	digest []string
	root   tlog.Hash
}

// key orders entries: by kind, then name (a NUL sorts before any byte a
// kind or name holds, so comparing keys compares kind first).
func key(kind, name string) string { return kind + "\x00" + name }

// leaf is a pinned entry's record: its kind, name and digest,
// NUL-separated (a tool or prompt name never holds a NUL: ToolNameSchema;
// Build refuses a resource URI that does).
func leaf(kind, name, digest string) []byte {
	return []byte(key(kind, name) + "\x00" + digest)
}

// Build returns the tree over the pinned tools and prompts (name → digest).
func Build(tools, prompts map[string]string) (*Tree, error) {
	return build(map[string]map[string]string{Tool: tools, Prompt: prompts})
}

// BuildResources returns the tree over a turn's pinned resources (URI or
// URI template → digest): its leaves are the concrete URIs; templates are
// left out (resourceuri.IsTemplate), the grant lists them.
func BuildResources(resources map[string]string) (*Tree, error) {
	uris := make(map[string]string, len(resources))
	for u, d := range resources {
		if !resourceuri.IsTemplate(u) {
			uris[u] = d
		}
	}
	return build(map[string]map[string]string{Resource: uris})
}

func build(kinds map[string]map[string]string) (*Tree, error) {
	t := &Tree{}
	for kind, entries := range kinds {
		for name := range entries {
			if strings.Contains(name, "\x00") {
				return nil, fmt.Errorf("pinproof: a %s name holds a NUL", kind)
			}
			t.keys = append(t.keys, key(kind, name))
		}
	}
	slices.Sort(t.keys)
	t.digest = make([]string, len(t.keys))
	for i, k := range t.keys {
		kind, name, _ := strings.Cut(k, "\x00")
		t.digest[i] = kinds[kind][name]
		hs, err := tlog.StoredHashes(int64(i), leaf(kind, name, t.digest[i]), t)
		if err != nil {
			return nil, err
		}
		t.stored = append(t.stored, hs...)
	}
	root, err := tlog.TreeHash(int64(len(t.keys)), t)
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

// Prove returns the pinned digest of the entry and its inclusion proof;
// false when it is not pinned.
func (t *Tree) Prove(kind, name string) (*sharedosv1.PinProof, bool) {
	i, ok := slices.BinarySearch(t.keys, key(kind, name))
	if !ok {
		return nil, false
	}
	hashes, ok := t.hashes(int64(i))
	if !ok {
		return nil, false
	}
	return &sharedosv1.PinProof{Index: int64(i), Digest: t.digest[i], Hashes: hashes}, true
}

// ProveAbsent proves that the entry is not pinned: the entries just before
// and after its place, each with its inclusion proof (nil at an end of the
// tree); false when it is pinned.
func (t *Tree) ProveAbsent(kind, name string) (*sharedosv1.PinProof, bool) {
	i, found := slices.BinarySearch(t.keys, key(kind, name))
	if found {
		return nil, false
	}
	out := &sharedosv1.PinProof{}
	var ok bool
	if i > 0 {
		if out.Before, ok = t.entry(i - 1); !ok {
			return nil, false
		}
	}
	if i < len(t.keys) {
		if out.After, ok = t.entry(i); !ok {
			return nil, false
		}
	}
	return out, true
}

func (t *Tree) entry(i int) (*sharedosv1.PinEntry, bool) {
	hashes, ok := t.hashes(int64(i))
	if !ok {
		return nil, false
	}
	kind, name, _ := strings.Cut(t.keys[i], "\x00")
	return &sharedosv1.PinEntry{Kind: kind, Name: name, Digest: t.digest[i], Index: int64(i), Hashes: hashes}, true
}

func (t *Tree) hashes(i int64) ([][]byte, bool) {
	p, err := tlog.ProveRecord(t.Size(), i, t)
	if err != nil {
		return nil, false
	}
	out := make([][]byte, len(p))
	for k, h := range p {
		out[k] = h[:]
	}
	return out, true
}

// ErrNotPinned: the call carries no proof, or one that does not prove its
// tool pinned under the grant's root.
var ErrNotPinned = errors.New("not in this turn's pinned catalogue")

// Check returns the digest proof pins the entry under root (Root) in a tree
// of size n; ErrNotPinned otherwise.
func Check(root string, n int64, kind, name string, proof *sharedosv1.PinProof) (string, error) {
	if proof == nil || !included(root, n, kind, name, proof.GetDigest(), proof.GetIndex(), proof.GetHashes()) {
		return "", ErrNotPinned
	}
	return proof.GetDigest(), nil
}

// ErrNotAbsent: the proof does not show the entry absent from the tree.
var ErrNotAbsent = errors.New("not proven absent from this turn's pinned catalogue")

// CheckAbsent returns nil when proof (ProveAbsent) shows the entry is not a
// leaf of the tree of size n under root: the entries it names are leaves,
// adjacent, at the tree's ends where one is missing, and the entry's key
// falls strictly between theirs.
func CheckAbsent(root string, n int64, kind, name string, proof *sharedosv1.PinProof) error {
	if proof == nil || strings.Contains(name, "\x00") {
		return ErrNotAbsent
	}
	k := key(kind, name)
	before, after := proof.GetBefore(), proof.GetAfter()
	next := int64(0) // the index after's must have
	if before != nil {
		if !included(root, n, before.GetKind(), before.GetName(), before.GetDigest(), before.GetIndex(), before.GetHashes()) ||
			key(before.GetKind(), before.GetName()) >= k {
			return ErrNotAbsent
		}
		next = before.GetIndex() + 1
	}
	if after == nil {
		if next != n {
			return ErrNotAbsent
		}
		return nil
	}
	if after.GetIndex() != next ||
		!included(root, n, after.GetKind(), after.GetName(), after.GetDigest(), after.GetIndex(), after.GetHashes()) ||
		key(after.GetKind(), after.GetName()) <= k {
		return ErrNotAbsent
	}
	return nil
}

// included reports whether the entry is the leaf at index of the tree of
// size n under root, by its inclusion proof.
func included(root string, n int64, kind, name, digest string, index int64, hashes [][]byte) bool {
	if index < 0 || index >= n || strings.Contains(kind, "\x00") || strings.Contains(name, "\x00") {
		return false
	}
	th, err := tlog.ParseHash(root)
	if err != nil {
		return false
	}
	p := make(tlog.RecordProof, len(hashes))
	for i, h := range hashes {
		if len(h) != tlog.HashSize {
			return false
		}
		copy(p[i][:], h)
	}
	return tlog.CheckRecord(p, n, th, index, tlog.RecordHash(leaf(kind, name, digest))) == nil
}
