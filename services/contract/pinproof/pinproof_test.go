package pinproof_test

import (
	"errors"
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/pinproof"
)

type pp = sharedosv1.PinProof

// with is a copy of p changed by f.
func with(p *pp, f func(*pp)) *pp {
	c := proto.Clone(p).(*pp)
	f(c)
	return c
}

func pin(n int) map[string]string {
	m := map[string]string{}
	for i := range n {
		m[fmt.Sprintf("ns.tool%03d", i)] = fmt.Sprintf("%064x", i+1)
	}
	return m
}

// Every pinned tool proves its own digest under the root, in trees of
// every shape; nothing else does.
func TestProveCheck(t *testing.T) {
	for _, n := range []int{1, 2, 3, 7, 8, 33} {
		p := pin(n)
		tree, err := pinproof.Build(p, nil)
		if err != nil {
			t.Fatal(err)
		}
		if tree.Size() != int64(n) {
			t.Fatalf("size %d, want %d", tree.Size(), n)
		}
		for name, digest := range p {
			proof, ok := tree.Prove(pinproof.Tool, name)
			if !ok {
				t.Fatalf("n=%d: no proof for %s", n, name)
			}
			got, err := pinproof.Check(tree.Root(), tree.Size(), pinproof.Tool, name, proof)
			if err != nil || got != digest {
				t.Fatalf("n=%d %s: Check = %q, %v; want %q", n, name, got, err, digest)
			}
			// Another tool's name, another digest, another index, a longer
			// proof: refused. (Root and size come from the signed grant,
			// never from the caller.)
			for what, f := range map[string]func() (string, int64, string, any){
				"name": func() (string, int64, string, any) { return tree.Root(), tree.Size(), name + "x", proof },
				"digest": func() (string, int64, string, any) {
					return tree.Root(), tree.Size(), name, with(proof, func(c *pp) { c.Digest = c.Digest[:63] + map[bool]string{true: "e", false: "f"}[c.Digest[63] == 'f'] })
				},
				"index": func() (string, int64, string, any) {
					return tree.Root(), tree.Size(), name, with(proof, func(c *pp) { c.Index = (c.Index + 1) % int64(n+1) })
				},
				"hashes": func() (string, int64, string, any) {
					return tree.Root(), tree.Size(), name, with(proof, func(c *pp) { c.Hashes = append(c.Hashes, make([]byte, 32)) })
				},
			} {
				root, size, tool, pr := f()
				if _, err := pinproof.Check(root, size, pinproof.Tool, tool, pr.(*pp)); !errors.Is(err, pinproof.ErrNotPinned) {
					t.Errorf("n=%d %s: a proof with another %s was accepted (%v)", n, name, what, err)
				}
			}
		}
		if _, ok := tree.Prove(pinproof.Tool, "not.pinned"); ok {
			t.Errorf("n=%d: a proof for a tool not pinned", n)
		}
		if _, err := pinproof.Check(tree.Root(), tree.Size(), pinproof.Tool, "ns.tool000", nil); !errors.Is(err, pinproof.ErrNotPinned) {
			t.Errorf("no proof accepted: %v", err)
		}
	}
	other, _ := pinproof.Build(map[string]string{"ns.tool000": fmt.Sprintf("%064x", 1)}, nil)
	tree, _ := pinproof.Build(pin(2), nil)
	proof, _ := tree.Prove(pinproof.Tool, "ns.tool000")
	if _, err := pinproof.Check(other.Root(), tree.Size(), pinproof.Tool, "ns.tool000", proof); !errors.Is(err, pinproof.ErrNotPinned) {
		t.Errorf("a proof under another root was accepted: %v", err)
	}
}

// The root depends on every pinned tool and digest, not on map order.
func TestRootBindsThePin(t *testing.T) {
	a, _ := pinproof.Build(pin(5), nil)
	b, _ := pinproof.Build(pin(5), nil)
	if a.Root() != b.Root() {
		t.Fatal("two builds of one pin differ")
	}
	p := pin(5)
	p["ns.tool002"] = fmt.Sprintf("%064x", 99)
	c, _ := pinproof.Build(p, nil)
	if c.Root() == a.Root() {
		t.Fatal("a changed digest kept the root")
	}
}

// An empty pin has a root, and nothing proves membership in it.
func TestEmptyPin(t *testing.T) {
	tree, err := pinproof.Build(nil, nil)
	if err != nil || tree.Size() != 0 || tree.Root() == "" {
		t.Fatalf("Build(nil) = %v size %d root %q", err, tree.Size(), tree.Root())
	}
	if _, err := pinproof.Check(tree.Root(), 0, pinproof.Tool, "files.read", &pp{Digest: "d"}); !errors.Is(err, pinproof.ErrNotPinned) {
		t.Errorf("a proof against the empty pin: %v", err)
	}
}

// A prompt and a tool of one name are two entries: neither's proof stands
// for the other.
func TestKindsAreApart(t *testing.T) {
	d := fmt.Sprintf("%064x", 7)
	tree, err := pinproof.Build(map[string]string{"x.y": d}, map[string]string{"x.y": d})
	if err != nil || tree.Size() != 2 {
		t.Fatalf("Build = %v, size %d", err, tree.Size())
	}
	tp, _ := tree.Prove(pinproof.Tool, "x.y")
	prp, _ := tree.Prove(pinproof.Prompt, "x.y")
	if got, err := pinproof.Check(tree.Root(), tree.Size(), pinproof.Prompt, "x.y", prp); err != nil || got != d {
		t.Fatalf("the prompt's proof: %q, %v", got, err)
	}
	if _, err := pinproof.Check(tree.Root(), tree.Size(), pinproof.Prompt, "x.y", tp); !errors.Is(err, pinproof.ErrNotPinned) {
		t.Errorf("a tool's proof stood for the prompt: %v", err)
	}
	if _, err := pinproof.Check(tree.Root(), tree.Size(), pinproof.Tool, "x.y", prp); !errors.Is(err, pinproof.ErrNotPinned) {
		t.Errorf("a prompt's proof stood for the tool: %v", err)
	}
}

// A resource URI that is not pinned is proven absent by its two neighbours
// (or one, at an end), in trees of every size; a pinned one is not, and
// every change to a proof of absence is refused.
func TestProveAbsent(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 7, 8, 33} {
		uris := map[string]string{}
		for i := range n {
			uris[fmt.Sprintf("file:///r/%03d", 2*i+1)] = fmt.Sprintf("%064x", i+1) // odd numbers pinned
		}
		tree, err := pinproof.BuildResources(uris)
		if err != nil {
			t.Fatal(err)
		}
		root, size := tree.Root(), tree.Size()
		for i := range 2*n + 2 {
			uri := fmt.Sprintf("file:///r/%03d", i)
			_, pinned := uris[uri]
			proof, ok := tree.ProveAbsent(pinproof.Resource, uri)
			if ok == pinned {
				t.Fatalf("n=%d %s: ProveAbsent ok=%v for a pinned=%v URI", n, uri, ok, pinned)
			}
			if pinned {
				exact, _ := tree.Prove(pinproof.Resource, uri)
				if pinproof.CheckAbsent(root, size, pinproof.Resource, uri, exact) == nil {
					t.Fatalf("n=%d %s: an inclusion proof passed for absence", n, uri)
				}
				continue
			}
			if err := pinproof.CheckAbsent(root, size, pinproof.Resource, uri, proof); err != nil {
				t.Fatalf("n=%d %s: CheckAbsent = %v", n, uri, err)
			}
			// The proof stands for this URI's place only, and no edit of it
			// passes.
			type bad struct {
				uri   string
				proof *pp
			}
			refused := map[string]bad{
				"a NUL in the URI": {uri + "\x00", proof},
				"nil":              {uri, nil},
			}
			if proof.Before != nil {
				refused["a pinned neighbour's URI"] = bad{proof.Before.Name, proof}
				refused["no before"] = bad{uri, with(proof, func(c *pp) { c.Before = nil })}
				refused["before's digest"] = bad{uri, with(proof, func(c *pp) { c.Before.Digest = "0" })}
				refused["before's index"] = bad{uri, with(proof, func(c *pp) { c.Before.Index-- })}
				refused["before as the after"] = bad{uri, with(proof, func(c *pp) { c.After, c.Before = c.Before, nil })}
			}
			if proof.After != nil {
				refused["after's URI"] = bad{proof.After.Name, proof}
				refused["no after"] = bad{uri, with(proof, func(c *pp) { c.After = nil })}
				refused["after's name"] = bad{uri, with(proof, func(c *pp) { c.After.Name += "x" })}
				refused["after's index"] = bad{uri, with(proof, func(c *pp) { c.After.Index++ })}
			}
			for what, r := range refused {
				if err := pinproof.CheckAbsent(root, size, pinproof.Resource, r.uri, r.proof); !errors.Is(err, pinproof.ErrNotAbsent) {
					t.Errorf("n=%d %s, %s: CheckAbsent = %v, want refused", n, uri, what, err)
				}
			}
			// Skipping a leaf: neighbours two apart do not prove absence.
			if n >= 2 && proof.Before != nil && proof.After != nil && proof.After.Index+1 < size {
				far, _ := tree.ProveAbsent(pinproof.Resource, fmt.Sprintf("file:///r/%03d", 2*int(proof.After.Index)+2))
				skip := with(proof, func(c *pp) { c.After = far.After })
				if pinproof.CheckAbsent(root, size, pinproof.Resource, uri, skip) == nil {
					t.Errorf("n=%d %s: neighbours two apart passed", n, uri)
				}
			}
		}
	}
	// A template is not a leaf: the tree is the concrete URIs' alone.
	concrete, _ := pinproof.BuildResources(map[string]string{"file:///a": "1", "file:///c": "2"})
	withTemplate, _ := pinproof.BuildResources(map[string]string{"file:///a": "1", "file:///c": "2", "file:///{p}": "3"})
	if concrete.Root() != withTemplate.Root() || withTemplate.Size() != 2 {
		t.Errorf("a template became a leaf: size %d", withTemplate.Size())
	}
	if _, err := pinproof.BuildResources(map[string]string{"a\x00b": "d"}); err == nil {
		t.Error("BuildResources took a URI holding a NUL")
	}
}
