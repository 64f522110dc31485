//go:build unix

package upstream

import (
	"os/exec"
	"syscall"
)

// ownProcessGroup starts cmd in a session of its own, and so a process
// group of its own, and makes its cancellation kill the whole group, so a
// launcher's children end with it. A session of its own: none of its
// descendants can join a process group or session of catalog-svc's
// (setpgid(2) stays within a session), which is how what the server
// leaves is told apart from catalog-svc's own children (family_linux.go).
func ownProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Cancel = func() error {
		if cmd.Process == nil {
			return nil
		}
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

// terminateGroup sends SIGTERM to cmd's process group.
func terminateGroup(cmd *exec.Cmd) error {
	return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
}
