//go:build !linux

package upstream

import (
	"errors"
	"os/exec"
)

// startConfined starts cmd unconfined: Landlock is Linux's. onUnconfined
// says so when private names anything.
func startConfined(cmd *exec.Cmd, private []string, onUnconfined func(error)) error {
	if len(private) > 0 {
		onUnconfined(errors.New("stdio servers are confined only on Linux (Landlock)"))
	}
	return cmd.Start()
}
