//go:build !unix

package upstream

import "os/exec"

// ownProcessGroup: elsewhere the process alone is killed.
func ownProcessGroup(*exec.Cmd) {}

// terminateGroup: elsewhere there is no SIGTERM; the process is killed.
func terminateGroup(cmd *exec.Cmd) error { return cmd.Process.Kill() }
