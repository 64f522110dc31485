package upstream

import (
	"errors"
	"os/exec"

	"golang.org/x/sys/unix"
)

// awaitExit returns once cmd's process has exited, leaving it unreaped:
// until cmd.Wait reaps it, its id (its process group's) is no one else's,
// so what is left of the group can still be killed.
func awaitExit(cmd *exec.Cmd) {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, cmd.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			return
		}
	}
}
