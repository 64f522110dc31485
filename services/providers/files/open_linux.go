package files

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// openBeneath opens rel (relative to the root) with openat2(2) and
// RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS: the kernel
// itself refuses, at open time, any path that leaves the root or passes a
// symbolic link on any component — so a link swapped in after resolve's
// walk is refused too (ELOOP). Where openat2 does not work (kernels before
// 5.6, or a seccomp profile that refuses it: opensBeneath) it falls back
// to os.Root, which confines to the root but follows in-root links.
func (p *Provider) openBeneath(rel string, flag int, perm os.FileMode) (*os.File, error) {
	if !p.linkProofOpen {
		return p.root.OpenFile(rel, flag|unix.O_NOFOLLOW, perm)
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
			return p.root.OpenFile(rel, flag|unix.O_NOFOLLOW, perm)
		default:
			return nil, &os.PathError{Op: "openat2", Path: rel, Err: err}
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
