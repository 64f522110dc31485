package upstream

import (
	"errors"
	"os"
	"os/exec"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// awaiting counts the awaitExit calls waiting (tests).
var awaiting atomic.Int64

// awaitExit returns once cmd's process has exited, leaving it unreaped:
// until cmd.Wait reaps it, its id (its process group's) is no one else's,
// so what is left of the group can still be killed. It waits through
// Go's poller on a pidfd, which becomes readable once the process exited:
// a wait blocked in waitid held an OS thread for each running server.
// Before Linux 5.3 (no pidfd_open) it blocks in waitid all the same.
func awaitExit(cmd *exec.Cmd) {
	awaiting.Add(1)
	defer awaiting.Add(-1)
	pid := cmd.Process.Pid
	fd, err := unix.PidfdOpen(pid, unix.O_NONBLOCK) // PIDFD_NONBLOCK
	if err != nil {
		blockUntilExit(pid)
		return
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer func() { _ = f.Close() }()
	rc, err := f.SyscallConn()
	if err != nil {
		blockUntilExit(pid)
		return
	}
	err = rc.Read(func(uintptr) bool { return exited(pid) })
	if err != nil {
		blockUntilExit(pid) // the poller refused the pidfd
	}
}

// exited reports whether pid, a child of this process, exited (left
// unreaped), without waiting.
func exited(pid int) bool {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT|unix.WNOHANG, nil)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return true // no such child: nothing to wait for
		}
		return info.Signo != 0 // WNOHANG, none exited: left zeroed
	}
}

// blockUntilExit returns once pid, a child of this process, exited (left
// unreaped), holding its thread until then.
func blockUntilExit(pid int) {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			return
		}
	}
}
