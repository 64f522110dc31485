package files

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
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
	p := providerAt(t, root)
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
	p := providerAt(t, root)
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
	p := providerAt(t, root)
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
		if err == nil || !strings.Contains(err.Error(), "leased") {
			t.Fatalf("a read of a leased file: %v, want refused as leased", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the open of a leased file still spinning after 10 s")
	}
	if _, err := p.write([]byte(`{"path":"/public/a.txt","content":"x"}`)); err == nil || !strings.Contains(err.Error(), "leased") {
		t.Errorf("a write of a leased file: %v, want refused as leased", err)
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
	p := providerAt(t, root)
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

// swapAfterListing is the provider's own walk with a racing local process:
// once the walk has listed parent, swap replaces a directory in it before
// the walk reads that directory.
type swapAfterListing struct {
	beneathFS
	parent string
	swap   func()
}

func (s swapAfterListing) ReadDir(name string) ([]fs.DirEntry, error) {
	ents, err := s.beneathFS.ReadDir(name)
	if name == s.parent {
		s.swap()
	}
	return ents, err
}

// files.search lists a directory the way files are opened (openBeneath),
// not through the os.Root's open (found by review): a directory replaced,
// after its parent was listed, by a link into /private is not listed
// through the link, and one replaced by a FIFO is refused at once rather
// than blocking the call past its deadline until a writer comes. Either
// way the rest is searched and the directory is named as not searched.
func TestSearchWalkRefusesADirectorySwappedAfterListing(t *testing.T) {
	for _, tc := range []struct {
		name string
		swap func(t *testing.T, dir string)
	}{
		{"link into private", func(t *testing.T, dir string) {
			if err := os.Symlink("../private", dir); err != nil {
				t.Error(err)
			}
		}},
		{"FIFO", func(t *testing.T, dir string) {
			if err := unix.Mkfifo(dir, 0o644); err != nil {
				t.Error(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := linkTree(t, nil)
			sub := filepath.Join(root, "public/sub")
			if err := os.Mkdir(sub, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(sub, "b.txt"), []byte("SECRET in sub"), 0o644); err != nil {
				t.Fatal(err)
			}
			p := providerAt(t, root)
			p.walk = swapAfterListing{beneathFS: beneathFS{p}, parent: "public", swap: func() {
				if err := os.RemoveAll(sub); err != nil {
					t.Error(err)
				}
				tc.swap(t, sub)
			}}
			// The search's own deadline bounds the wait: a walk that
			// blocked in the open ignores it, and the test then opens the
			// FIFO for writing itself so that the blocked call can end.
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			type answer struct {
				out string
				err error
			}
			done := make(chan answer, 1)
			go func() {
				out, err := p.search(ctx, []byte(`{"query":"SECRET","path":"/public"}`))
				done <- answer{out, err}
			}()
			var got answer
			select {
			case got = <-done:
			case <-ctx.Done():
				if w, err := os.OpenFile(sub, os.O_WRONLY|unix.O_NONBLOCK, 0); err == nil {
					w.Close()
				}
				<-done
				t.Fatal("the search was still blocked opening /public/sub at its deadline")
			}
			if got.err != nil || !strings.Contains(got.out, "not searched, unreadable: /public/sub") || strings.Contains(got.out, "/public/sub/") {
				t.Errorf("search: %q, %v; want /public/sub named as not searched and nothing found through it", got.out, got.err)
			}
		})
	}
}

// The one-component-at-a-time open closes every directory it opened, on
// every path out (found by review: a refused path leaked them).
func TestOpenNoFollowLeaksNoDescriptor(t *testing.T) {
	root := linkTree(t, map[string]string{"public/swapped": "../private"})
	p := providerAt(t, root)
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
	p := providerAt(t, root)
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
	var reads atomic.Int32
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
			reads.Add(1)
		}
	}()
	// At least 40 writes, and on until 20 reads were made meanwhile (or
	// one failed: seen).
	for i := 0; i < 40 || reads.Load() < 20 && len(seen) == 0; i++ {
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

// asNobodyEnv names the root a re-run of a test as nobody works on.
const asNobodyEnv = "FILES_TEST_ROOT_AS_NOBODY"

// asNobody runs the test named name again in a process of user nobody on
// root (prepared by the caller, running as root: the tests run as root, for
// which every permission check passes), and fails t with its output when
// it fails. It returns false in that re-run itself, whose root is root.
func asNobody(t *testing.T, name string, root *string) bool {
	t.Helper()
	if r := os.Getenv(asNobodyEnv); r != "" {
		*root = r
		return false
	}
	if os.Geteuid() != 0 {
		return false // already unprivileged: the test runs here
	}
	// The test binary, where nobody may run it (go test's build directory
	// is root's alone).
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "files.test")
	if err := os.WriteFile(bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(bin, "-test.run=^"+name+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), asNobodyEnv+"="+*root)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s as nobody: %v\n%s", name, err, out)
	}
	return true
}

// A write needs what writing the file in place needed: a file this process
// may not write is refused (found by review: replacing it by a rename
// needed write permission on the directory only), and one whose owner it
// cannot keep is written in place, keeping owner and mode; a new file
// takes the umask's mode. Run as root (as CI does), the checks run again
// as user nobody on files root prepared; run as another user, on files of
// that user's (the ones of another owner left out).
func TestWriteNeedsTheFilesPermission(t *testing.T) {
	root := ""
	if os.Getenv(asNobodyEnv) == "" {
		root = linkTree(t, nil)
		for _, d := range []string{filepath.Dir(root), root} { // t.TempDir's own two
			if err := os.Chmod(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		pub := filepath.Join(root, "public")
		if err := os.Chmod(pub, 0o777); err != nil {
			t.Fatal(err)
		}
		for name, mode := range map[string]os.FileMode{"ro.txt": 0o444, "hidden.txt": 0o640, "shared.txt": 0o666} {
			if err := os.WriteFile(filepath.Join(pub, name), []byte("OLD"), mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(filepath.Join(pub, name), mode); err != nil {
				t.Fatal(err)
			}
		}
	}
	if asNobody(t, "TestWriteNeedsTheFilesPermission", &root) {
		return
	}
	// The files' owner: root when root prepared them for nobody.
	owner := uint32(os.Getuid())
	if os.Getenv(asNobodyEnv) != "" {
		owner = 0
	}
	defer syscall.Umask(syscall.Umask(0o077))
	p := providerAt(t, root)
	write := func(name string) error {
		_, err := p.write([]byte(`{"path":"/public/` + name + `","content":"NEW"}`))
		return err
	}
	content := func(name string) (string, os.FileInfo) {
		b, _ := os.ReadFile(filepath.Join(root, "public", name))
		fi, err := os.Stat(filepath.Join(root, "public", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b), fi
	}
	uid := func(fi os.FileInfo) uint32 { return fi.Sys().(*syscall.Stat_t).Uid }
	refused := []string{"ro.txt"}
	if owner != uint32(os.Getuid()) {
		refused = append(refused, "hidden.txt") // another user's, 0640
	}
	for _, name := range refused {
		if err := write(name); err == nil || !strings.Contains(err.Error(), "permission denied") {
			t.Errorf("%s, not writable by this user: %v, want permission denied", name, err)
		}
		// (hidden.txt this user may not read either: its owner tells.)
		if text, fi := content(name); text != "OLD" && name == "ro.txt" || uid(fi) != owner {
			t.Errorf("%s after the refused write: %q owned by %d, want OLD owned by %d", name, text, uid(fi), owner)
		}
	}
	if err := write("shared.txt"); err != nil {
		t.Errorf("shared.txt, writable by all: %v", err)
	}
	if text, fi := content("shared.txt"); text != "NEW" || uid(fi) != owner || fi.Mode().Perm() != 0o666 {
		t.Errorf("shared.txt: %q, owner %d, mode %v; want NEW, owner %d and mode 0666 kept", text, uid(fi), fi.Mode().Perm(), owner)
	}
	if err := write("new.txt"); err != nil {
		t.Fatal(err)
	}
	if text, fi := content("new.txt"); text != "NEW" || fi.Mode().Perm() != 0o600 {
		t.Errorf("new.txt: %q, mode %v; want NEW, 0600 (umask 077)", text, fi.Mode().Perm())
	}
	entries, err := os.ReadDir(filepath.Join(root, "public"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), tempPrefix) {
			t.Errorf("a temporary file was left behind: %s", e.Name())
		}
	}
}

// A file named as a write's temporary file (one a crash left, or one
// under way) is neither read nor searched (found by review: its content
// is the new content of a file the policy judged by the file's name).
func TestWriteTemporaryFilesAreHidden(t *testing.T) {
	root := linkTree(t, nil)
	if err := os.WriteFile(filepath.Join(root, "public", tempPrefix+"0123456789abcdef.tmp"), []byte("HIDDEN kiwi"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := providerAt(t, root)
	if out, err := p.search(t.Context(), []byte(`{"query":"kiwi","path":"/public"}`)); err != nil || strings.Contains(out, "HIDDEN") {
		t.Errorf("search: %q, %v; want the temporary file skipped", out, err)
	}
	if out, err := p.read([]byte(`{"path":"/public/` + tempPrefix + `0123456789abcdef.tmp"}`)); err == nil || strings.Contains(out, "HIDDEN") {
		t.Errorf("read of the temporary file: %q, %v; want refused", out, err)
	}
}

// acl is a POSIX ACL in the form Linux keeps it as an extended attribute:
// version 2, then (tag, permissions, id) per entry, in tag order.
func acl(entries ...[3]uint32) []byte {
	b := binary.LittleEndian.AppendUint32(nil, 2)
	for _, e := range entries {
		b = binary.LittleEndian.AppendUint16(b, uint16(e[0]))
		b = binary.LittleEndian.AppendUint16(b, uint16(e[1]))
		b = binary.LittleEndian.AppendUint32(b, e[2])
	}
	return b
}

// A write keeps the old file's extended attributes — its ACL, whose mask
// is the mode's group bits — and gives it no default ACL of
// its directory's (found by review: a whole-file write dropped the ACL,
// opening the file to its group, and took the directory's default ACL,
// opening it to another user).
func TestWriteKeepsExtendedAttributes(t *testing.T) {
	root := linkTree(t, nil)
	pub := filepath.Join(root, "public")
	const none = 0xffffffff
	access := acl([3]uint32{0x01, 6, none}, [3]uint32{0x02, 6, 65534}, [3]uint32{0x04, 0, none}, [3]uint32{0x10, 6, none}, [3]uint32{0x20, 0, none})
	withACL, plain := filepath.Join(pub, "acl.txt"), filepath.Join(pub, "a.txt")
	if err := os.WriteFile(withACL, []byte("OLD"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(withACL, "system.posix_acl_access", access, 0); err != nil {
		t.Fatalf("setting an ACL (this file system must keep ACLs): %v", err)
	}
	def := acl([3]uint32{0x01, 7, none}, [3]uint32{0x02, 6, 65534}, [3]uint32{0x04, 5, none}, [3]uint32{0x10, 7, none}, [3]uint32{0x20, 5, none})
	if err := unix.Setxattr(pub, "system.posix_acl_default", def, 0); err != nil {
		t.Fatal(err)
	}
	p := providerAt(t, root)
	before, err := os.Stat(withACL)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"acl.txt", "a.txt"} {
		if _, err := p.write([]byte(`{"path":"/public/` + name + `","content":"NEW"}`)); err != nil {
			t.Fatal(err)
		}
	}
	get := func(path, name string) string {
		buf := make([]byte, 256)
		n, err := unix.Getxattr(path, name, buf)
		if err != nil {
			return err.Error()
		}
		return string(buf[:n])
	}
	after, err := os.Stat(withACL)
	if err != nil {
		t.Fatal(err)
	}
	if got := get(withACL, "system.posix_acl_access"); got != string(access) || after.Mode() != before.Mode() {
		t.Errorf("acl.txt after the write: ACL %x, mode %v; want %x, %v kept", got, after.Mode(), access, before.Mode())
	}
	if got := get(plain, "system.posix_acl_access"); !strings.Contains(got, "no data") {
		t.Errorf("a.txt took an ACL from its directory's default: %x", got)
	}
	if b, err := os.ReadFile(withACL); err != nil || string(b) != "NEW" {
		t.Errorf("acl.txt: %q, %v", b, err)
	}
}

// providerAt is a provider on root, closed when the test ends.
func providerAt(t *testing.T, root string) *Provider {
	t.Helper()
	p, err := New(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}
