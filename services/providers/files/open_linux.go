package files

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"
)

// openBeneath opens rel (relative to the root) with openat2(2) and
// RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS: the kernel
// itself refuses, at open time, any path that leaves the root or passes a
// symbolic link on any component — so a link swapped in after resolve's
// walk is refused too (ELOOP). Where openat2 does not work (kernels before
// 5.6, or a seccomp profile that refuses it: opensBeneath) it opens one
// component at a time instead (openNoFollow), which refuses links as well.
func (p *Provider) openBeneath(rel string, flag int, perm os.FileMode) (*os.File, error) {
	if !p.linkProofOpen {
		return p.openNoFollow(rel, flag, perm)
	}
	how := unix.OpenHow{
		Flags:   uint64(flag | unix.O_CLOEXEC | unix.O_NOFOLLOW),
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	}
	if flag&os.O_CREATE != 0 {
		how.Mode = uint64(perm.Perm())
	}
	for raced := 0; ; {
		fd, err := unix.Openat2(int(p.dir.Fd()), rel, &how)
		switch {
		case err == nil:
			return os.NewFile(uintptr(fd), rel), nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EAGAIN) && raced < maxOpenRaces:
			// A rename raced the lookup: try again, a few times. (A file
			// another process holds a lease on answers EAGAIN too, for as
			// long as the lease lasts: that is an error, not a loop.)
			raced++
			continue
		case errors.Is(err, unix.ENOSYS):
			return p.openNoFollow(rel, flag, perm)
		default:
			return nil, &os.PathError{Op: "openat2", Path: rel, Err: err}
		}
	}
}

// openNoFollow opens rel beneath the root one component at a time, each
// relative to the directory opened before it and with O_NOFOLLOW: a
// symbolic link on any component is refused (ELOOP), on any kernel, and no
// component can be swapped for a link between a check and the open (os.Root
// would follow a link that stays inside the root: /public/x -> ../private).
// rel is clean and relative (resolve): "." or names without "..".
func (p *Provider) openNoFollow(rel string, flag int, perm os.FileMode) (*os.File, error) {
	fail := func(err error) (*os.File, error) { return nil, &os.PathError{Op: "openat", Path: rel, Err: err} }
	comps := strings.Split(rel, "/")
	last := comps[len(comps)-1]
	for _, c := range comps[:len(comps)-1] {
		if c == "" || c == "." || c == ".." {
			return fail(unix.EINVAL)
		}
	}
	if last == "" || last == ".." || (last == "." && rel != ".") {
		return fail(unix.EINVAL)
	}
	root := int(p.dir.Fd())
	dir := root
	defer func() {
		if dir != root {
			_ = unix.Close(dir)
		}
	}()
	for _, c := range comps[:len(comps)-1] {
		// O_PATH: passing through needs search permission only, as with
		// openat2.
		fd, err := openat(dir, c, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
		if errors.Is(err, unix.ENOTDIR) && isLink(dir, c) {
			err = unix.ELOOP // said as openat2 says it: a symbolic link on the path
		}
		if err != nil {
			return fail(err)
		}
		if dir != root {
			_ = unix.Close(dir)
		}
		dir = fd
	}
	fd, err := openat(dir, last, flag|unix.O_NOFOLLOW, uint32(perm.Perm()))
	if err != nil {
		return fail(err)
	}
	return os.NewFile(uintptr(fd), rel), nil
}

func isLink(dir int, name string) bool {
	var st unix.Stat_t
	return unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK
}

func openat(dir int, name string, flag int, perm uint32) (int, error) {
	for {
		fd, err := unix.Openat(dir, name, flag|unix.O_CLOEXEC, perm)
		if !errors.Is(err, unix.EINTR) {
			return fd, err
		}
	}
}

// maxOpenRaces bounds openBeneath's retries of an open a rename raced.
const maxOpenRaces = 8

// opensBeneath reports whether openat2 works on this kernel (Linux 5.6+,
// not blocked by a seccomp profile): then openBeneath refuses every
// symbolic link itself.
func (p *Provider) opensBeneath() bool {
	how := unix.OpenHow{Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS}
	fd, err := unix.Openat2(int(p.dir.Fd()), ".", &how)
	if err != nil {
		return false
	}
	_ = unix.Close(fd)
	return true
}

// replace writes content to t as a new file in t's directory, renamed over
// the old one: a reader sees the old content or the new, never a part, and
// a crash leaves one of the two (the file is synced before the rename, the
// directory after). The directory is opened beneath the root refusing a
// link on every component (openBeneath). The target, when there is one,
// must be a regular file with one name (another may lie where the policy
// would never allow a write), and the new file takes its permissions and,
// where this process may, its owner.
func (p *Provider) replace(t target, content string) (int, error) {
	dirRel, name := path.Split(t.rel)
	if dirRel = strings.TrimSuffix(dirRel, "/"); dirRel == "" {
		dirRel = "."
	}
	d, err := p.openBeneath(dirRel, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return 0, describe(t.display, err)
	}
	defer d.Close()
	dir := int(d.Fd())
	mode, owner := uint32(0o644), (*unix.Stat_t)(nil)
	var st unix.Stat_t
	switch err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW); {
	case err == nil:
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
		case unix.S_IFDIR:
			return 0, fmt.Errorf("is a directory: %s", t.display)
		case unix.S_IFLNK:
			return 0, describe(t.display, unix.ELOOP)
		default:
			return 0, fmt.Errorf("not a regular file: %s", t.display)
		}
		if st.Nlink > 1 {
			return 0, fmt.Errorf("refused: %s has other hard links; it is not written", t.display)
		}
		mode, owner = st.Mode&0o777, &st
	case !errors.Is(err, unix.ENOENT):
		return 0, describe(t.display, err)
	}
	var r [8]byte
	_, _ = rand.Read(r[:])
	tmp := ".sharedos-write-" + hex.EncodeToString(r[:]) + ".tmp"
	fd, err := openat(dir, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW, mode)
	if err != nil {
		return 0, describe(t.display, err)
	}
	f := os.NewFile(uintptr(fd), tmp)
	renamed := false
	defer func() {
		if !renamed {
			_ = unix.Unlinkat(dir, tmp, 0)
		}
	}()
	if owner != nil {
		_ = f.Chown(int(owner.Uid), int(owner.Gid)) // only a privileged process may
	}
	werr := unix.Fchmod(fd, mode) // the mode as it was, not as the umask left it
	n := 0
	if werr == nil {
		n, werr = f.WriteString(content)
	}
	if werr == nil {
		werr = f.Sync() // "wrote n bytes" means on disk
	}
	if err := errors.Join(werr, f.Close()); err != nil {
		return 0, fmt.Errorf("write failed: %s", t.display)
	}
	if err := unix.Renameat(dir, tmp, dir, name); err != nil {
		return 0, fmt.Errorf("write failed: %s", t.display)
	}
	renamed = true
	if err := d.Sync(); err != nil {
		return 0, fmt.Errorf("write failed: %s (written, not yet on disk)", t.display)
	}
	return n, nil
}
