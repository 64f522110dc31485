package upstream

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// closeRange is close_range(2) (tests refuse it).
var closeRange = unix.CloseRange

// inheritNoFiles marks every descriptor of this process from 3 on
// close-on-exec, so a stdio server started next gets its stdin, stdout and
// stderr alone (and what os/exec hands it on purpose: ExtraFiles, dup'ed
// into place in the child). Go opens its own descriptors close-on-exec,
// but those catalog-svc inherited — the launching shell's, a supervisor's
// — are not, and every server got them (the write end of a pipe a shell
// waits on, among others). The descriptors stay open here: close-on-exec
// only keeps them from a program this process executes. Run before each
// start (one close_range(2), Linux 5.11 and later; else a walk of
// /proc/self/fd), so a descriptor leaked later, by a library, is kept
// from the servers too. Whatever close_range's error, the walk is tried:
// a seccomp profile refusing it (EPERM) left every descriptor inheritable.
func inheritNoFiles() error {
	if closeRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC) == nil {
		return nil
	} // any error: too old a kernel (ENOSYS, EINVAL), or refused (EPERM: a seccomp profile)
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return err
	}
	names, err := d.Readdirnames(-1)
	own := int(d.Fd())
	if err != nil {
		_ = d.Close()
		return err
	}
	for _, name := range names {
		fd, err := strconv.Atoi(name)
		if err != nil || fd < 3 || fd == own {
			continue
		}
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err != nil || flags&unix.FD_CLOEXEC != 0 {
			continue // closed meanwhile, or already
		}
		_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETFD, flags|unix.FD_CLOEXEC)
	}
	return d.Close()
}
