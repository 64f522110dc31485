//go:build !linux

package upstream

import "os/exec"

// startTracked starts cmd. Elsewhere than Linux a process a stdio server
// leaves outside its process group outlives it (no subreaper to adopt it).
func startTracked(_ *exec.Cmd, start func() error, _ func(error)) error { return start() }

// reapTracked reaps cmd's process.
func reapTracked(cmd *exec.Cmd) { _ = cmd.Wait() }

// killLeft: elsewhere only the server's process group is killed.
func killLeft(int) {}
