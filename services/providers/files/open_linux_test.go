package files

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestOpenRefusesLinksItself (issue 17, item 18): the open, not only the
// walk before it, refuses a symbolic link on any component — the link an
// attacker swaps in after resolve's Lstat walk — and a path out of the root.
func TestOpenRefusesLinksItself(t *testing.T) {
	root := linkTree(t, map[string]string{"public/swapped": "../private"})
	p, err := New(root)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	// One component at a time, where openat2 does not work (found by
	// review: that fallback was os.Root, which follows a link that stays
	// inside the root), and with openat2 where it does.
	modes := []bool{false}
	if p.linkProofOpen {
		modes = append(modes, true)
	}
	for _, proof := range modes {
		p.linkProofOpen = proof
		for _, rel := range []string{"public/swapped/secret.txt", "public/swapped"} {
			f, err := p.openBeneath(rel, os.O_RDONLY, 0)
			if err == nil {
				f.Close()
				t.Fatalf("openat2 %v: openBeneath(%s) followed a symbolic link", proof, rel)
			}
			if !errors.Is(err, syscall.ELOOP) {
				t.Errorf("openat2 %v: openBeneath(%s) = %v, want ELOOP", proof, rel, err)
			}
		}
		if f, err := p.openBeneath("../outside", os.O_RDONLY, 0); err == nil {
			f.Close()
			t.Fatalf("openat2 %v: openBeneath escaped the root", proof)
		}
		f, err := p.openBeneath("private/secret.txt", os.O_RDONLY, 0)
		if err != nil {
			t.Fatalf("openat2 %v: a plain path: %v", proof, err)
		}
		f.Close()
		// search opens the names its walk listed, with no walk of its
		// own: a directory swapped for a link after the listing.
		if found, err := p.searchFile("public/swapped/secret.txt", "SECRET", 10); err == nil || len(found) != 0 {
			t.Errorf("openat2 %v: search read through a link: %v, %v", proof, found, err)
		}
		created, err := p.openBeneath("public/new.txt", os.O_WRONLY|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatalf("openat2 %v: create: %v", proof, err)
		}
		created.Close()
		if err := os.Remove(filepath.Join(root, "public/new.txt")); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReadRefusesLinksEitherWay: files.read refuses a link on any component
// whether the open checks it (openat2, no Lstat walk) or the walk does (a
// kernel without openat2), with the same description.
func TestReadRefusesLinksEitherWay(t *testing.T) {
	root := linkTree(t, map[string]string{"public/dir-link": "../private", "public/file-link": "../private/secret.txt"})
	p, err := New(root)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	modes := []bool{false}
	if p.linkProofOpen {
		modes = append(modes, true)
	}
	for _, proof := range modes {
		p.linkProofOpen = proof
		for _, path := range []string{"/public/dir-link/secret.txt", "/public/file-link"} {
			text, err := p.read([]byte(`{"path":"` + path + `"}`))
			if err == nil || !strings.Contains(err.Error(), "symbolic link") || strings.Contains(text, "SECRET") {
				t.Errorf("linkProofOpen=%v read %s = %q, %v; want a symbolic-link refusal", proof, path, text, err)
			}
		}
		if _, err := p.read([]byte(`{"path":"/public/missing.txt"}`)); err == nil || !strings.Contains(err.Error(), "not found: /public/missing.txt") {
			t.Errorf("linkProofOpen=%v missing file: %v", proof, err)
		}
		if text, err := p.read([]byte(`{"path":"/public/a.txt"}`)); err != nil || text != "A" {
			t.Errorf("linkProofOpen=%v plain read = %q, %v", proof, text, err)
		}
	}
}

// linkTree is a root with /public/a.txt ("A"), /private/secret.txt
// ("SECRET") and the symbolic links given (name → target).
func linkTree(t *testing.T, links map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range map[string]string{"public/a.txt": "A", "private/secret.txt": "SECRET"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// A file another process holds a write lease on answers every
// non-blocking open with EAGAIN for as long as the lease lasts (45 s by
// default): the open fails after a few tries instead of spinning on a core
// all that time (found by review).
func TestLeasedFileFailsTheOpen(t *testing.T) {
	root := linkTree(t, nil)
	p, err := New(root)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	holder, err := os.OpenFile(filepath.Join(root, "public/a.txt"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	if _, err := unix.FcntlInt(holder.Fd(), unix.F_SETLEASE, unix.F_WRLCK); err != nil {
		t.Fatalf("taking a write lease (this filesystem must support leases): %v", err)
	}
	done := make(chan error, 1)
	go func() { _, err := p.read([]byte(`{"path":"/public/a.txt"}`)); done <- err }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a read opened a leased file")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the open of a leased file still spinning after 10 s")
	}
	if _, err := unix.FcntlInt(holder.Fd(), unix.F_SETLEASE, unix.F_UNLCK); err != nil {
		t.Fatal(err)
	}
	// Where openat2 cannot be used (a seccomp profile answering EPERM), the
	// provider opens through os.Root instead: a plain read still works.
	p.linkProofOpen = false
	if text, err := p.read([]byte(`{"path":"/public/a.txt"}`)); err != nil || text != "A" {
		t.Fatalf("read through os.Root = %q, %v", text, err)
	}
}

// files.search reads only regular files: a FIFO swapped in after the walk
// listed a file is refused at once, not read for as long as a writer holds
// it open (found by review).
func TestSearchReadsOnlyRegularFiles(t *testing.T) {
	root := linkTree(t, nil)
	p, err := New(root)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	fifo := filepath.Join(root, "public/pipe")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	writer, err := os.OpenFile(fifo, os.O_RDWR, 0) // holds it open, writes nothing
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close()
	done := make(chan error, 1)
	go func() { _, err := p.searchFile("public/pipe", "x", 10); done <- err }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a FIFO was searched")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("searching a FIFO still blocked after 10 s")
	}
}

// The one-component-at-a-time open closes every directory it opened, on
// every path out (found by review: a refused path leaked them).
func TestOpenNoFollowLeaksNoDescriptor(t *testing.T) {
	root := linkTree(t, map[string]string{"public/swapped": "../private"})
	p, err := New(root)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	fds := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	before := fds()
	for range 50 {
		for _, rel := range []string{"public//a.txt", "public/./a.txt", "public/swapped/secret.txt", "public/none/x", "private/secret.txt/x"} {
			if f, err := p.openNoFollow(rel, os.O_RDONLY, 0); err == nil {
				f.Close()
				t.Fatalf("openNoFollow(%s) opened", rel)
			}
		}
		f, err := p.openNoFollow("public/a.txt", os.O_RDONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	if after := fds(); after > before {
		t.Errorf("%d descriptors open after 300 opens, %d before", after, before)
	}
}

// A write replaces the file whole: a read meanwhile sees the old content
// or the new, never an empty or partial file (found by review: the file
// was truncated, then written). The file keeps its permissions, and no
// temporary file is left behind.
func TestWriteReplacesWhole(t *testing.T) {
	root := linkTree(t, nil)
	p, err := New(root)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	name := filepath.Join(root, "public/a.txt")
	if err := os.Chmod(name, 0o600); err != nil {
		t.Fatal(err)
	}
	const size = 256 << 10
	contents := []string{strings.Repeat("A", size), strings.Repeat("B", size)}
	if _, err := p.write([]byte(`{"path":"/public/a.txt","content":"` + contents[0] + `"}`)); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	seen := make(chan string, 1)
	go func() {
		defer close(seen)
		for {
			select {
			case <-stop:
				return
			default:
			}
			text, err := p.read([]byte(`{"path":"/public/a.txt"}`))
			if err != nil || text != contents[0] && text != contents[1] {
				seen <- fmt.Sprintf("%d bytes, %v", len(text), err)
				return
			}
		}
	}()
	for i := range 40 {
		if _, err := p.write([]byte(`{"path":"/public/a.txt","content":"` + contents[i%2] + `"}`)); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	if bad, ok := <-seen; ok {
		t.Errorf("a read during writes saw %s, want the old or the new content whole", bad)
	}
	fi, err := os.Stat(name)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("after the writes: %v, %v; want mode 0600 kept", fi.Mode(), err)
	}
	entries, err := os.ReadDir(filepath.Dir(name))
	if err != nil || len(entries) != 1 {
		t.Errorf("the directory holds %v (%v), want a.txt alone", entries, err)
	}
}
