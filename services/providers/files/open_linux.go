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
// link on every component (openBeneath). The old file, when there is one,
// is opened for writing first — so this process writes only what it may
// write (the rename alone needs the directory only), a FIFO or a link is
// refused, and a lease holder is told — and must be a regular file with
// one name (another may lie where the policy would never allow a write).
// The new file takes its permissions (without set-id bits) and owner; where
// the owner cannot be kept (another user's file, this process not root),
// nor its extended attributes (an ACL, a label), or the directory takes no
// new file, the old file is written in place. A new file is renamed only
// to a name still free.
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
	var old *os.File
	var st unix.Stat_t
	switch fd, err := openat(dir, name, unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0); {
	case err == nil:
		old = os.NewFile(uintptr(fd), name)
		defer old.Close()
		if err := unix.Fstat(fd, &st); err != nil {
			return 0, describe(t.display, err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFREG {
			return 0, fmt.Errorf("not a regular file: %s", t.display)
		}
		if st.Nlink > 1 {
			return 0, fmt.Errorf("refused: %s has other hard links; it is not written", t.display)
		}
	case errors.Is(err, unix.ENOENT):
	case errors.Is(err, unix.EISDIR):
		return 0, fmt.Errorf("is a directory: %s", t.display)
	case errors.Is(err, unix.ENXIO):
		return 0, fmt.Errorf("not a regular file: %s", t.display)
	default:
		return 0, describe(t.display, err)
	}
	mode := uint32(0o644) // a new file: as the umask leaves it
	if old != nil {
		mode = st.Mode & 0o777
	}
	var r [8]byte
	_, _ = rand.Read(r[:])
	tmp := tempPrefix + hex.EncodeToString(r[:]) + ".tmp"
	fd, err := openat(dir, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW, mode)
	if err != nil {
		if old != nil && (errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM)) {
			return writeInPlace(old, t, content) // the directory takes no new file
		}
		return 0, writeFailed(t, err) // no space: the old file stays whole
	}
	f := os.NewFile(uintptr(fd), tmp)
	renamed := false
	defer func() {
		if !renamed {
			_ = f.Close()
			_ = unix.Unlinkat(dir, tmp, 0)
		}
	}()
	if old != nil {
		var mine unix.Stat_t
		if err := unix.Fstat(fd, &mine); err != nil {
			return 0, writeFailed(t, err)
		}
		if mine.Uid != st.Uid || mine.Gid != st.Gid {
			if err := unix.Fchown(fd, int(st.Uid), int(st.Gid)); err != nil {
				return writeInPlace(old, t, content) // the owner cannot be kept
			}
		}
		// The old file's extended attributes, and only those: an ACL (its
		// mask is the mode's group bits), a security label, user
		// attributes — not a default ACL of the directory the new file
		// took. Where they cannot be set, the file is written in place.
		if !sameXattrs(int(old.Fd()), fd) {
			return writeInPlace(old, t, content)
		}
		if err := unix.Fchmod(fd, mode); err != nil { // as it was, not as the umask left it
			return 0, writeFailed(t, err)
		}
	}
	n, werr := f.WriteString(content)
	if werr == nil {
		werr = f.Sync() // "wrote n bytes" means on disk
	}
	if err := errors.Join(werr, f.Close()); err != nil {
		return 0, writeFailed(t, err)
	}
	if err := rename(dir, tmp, name, old == nil); err != nil {
		return 0, writeFailed(t, err)
	}
	renamed = true
	if err := d.Sync(); err != nil {
		return 0, fmt.Errorf("write failed: %s (written, not yet on disk)", t.display)
	}
	return n, nil
}

// rename renames tmp to name in dir; fresh: only if there is no name (one
// that appeared since it was looked for was never checked), EEXIST if
// there is.
func rename(dir int, tmp, name string, fresh bool) error {
	if !fresh {
		return unix.Renameat(dir, tmp, dir, name)
	}
	err := unix.Renameat2(dir, tmp, dir, name, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		// A file system without RENAME_NOREPLACE: a link fails on an
		// existing name too.
		if err = unix.Linkat(dir, tmp, dir, name, 0); err == nil {
			_ = unix.Unlinkat(dir, tmp, 0)
		}
	}
	return err
}

// sameXattrs gives the file to the extended attributes that the file from
// has, and only those; false when it cannot (or they cannot be read).
func sameXattrs(from, to int) bool {
	want, ok := xattrs(from)
	if !ok {
		return false
	}
	have, ok := xattrs(to)
	if !ok {
		return false
	}
	for name := range have {
		if _, keep := want[name]; !keep && unix.Fremovexattr(to, name) != nil {
			return false
		}
	}
	for name, v := range want {
		if cur, ok := have[name]; ok && string(cur) == string(v) {
			continue
		}
		if unix.Fsetxattr(to, name, v, 0) != nil {
			return false
		}
	}
	return true
}

// xattrs are fd's extended attributes by name; none where the file system
// keeps none.
func xattrs(fd int) (map[string][]byte, bool) {
	out := map[string][]byte{}
	size, err := unix.Flistxattr(fd, nil)
	switch {
	case errors.Is(err, unix.ENOTSUP):
		return out, true
	case err != nil:
		return nil, false
	case size == 0:
		return out, true
	}
	buf := make([]byte, size)
	if size, err = unix.Flistxattr(fd, buf); err != nil {
		return nil, false // changed meanwhile: in place
	}
	for _, name := range strings.Split(strings.TrimSuffix(string(buf[:size]), "\x00"), "\x00") {
		n, err := unix.Fgetxattr(fd, name, nil)
		if err != nil {
			return nil, false
		}
		v := make([]byte, n)
		if n, err = unix.Fgetxattr(fd, name, v); err != nil {
			return nil, false
		}
		out[name] = v[:n]
	}
	return out, true
}

// writeInPlace writes content over f, the file t opened for writing.
func writeInPlace(f *os.File, t target, content string) (int, error) {
	n, err := overwrite(f, content)
	if err != nil {
		return 0, writeFailed(t, err)
	}
	return n, nil
}

// writeFailed says why a write of t failed, as far as the caller may know.
func writeFailed(t target, err error) error {
	switch {
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		return fmt.Errorf("permission denied: %s", t.display)
	case errors.Is(err, unix.ENOSPC), errors.Is(err, unix.EDQUOT):
		return fmt.Errorf("write failed: %s (no space left)", t.display)
	case errors.Is(err, unix.EROFS):
		return fmt.Errorf("write failed: %s (read-only file system)", t.display)
	}
	return fmt.Errorf("write failed: %s", t.display)
}
