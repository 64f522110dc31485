//go:build !linux

package upstream

import "os/exec"

// awaitExit returns once cmd's process has exited. Elsewhere than Linux
// it is reaped here (capturingStdio.watch): what is left of its group is
// killed after, by an id that is in principle free again.
func awaitExit(cmd *exec.Cmd) { _ = cmd.Wait() }
