//go:build unix

package pdp

import (
	"os"
	"syscall"
)

// openNoFollow opens p for reading without following a final link (ELOOP)
// and without blocking on a FIFO.
func openNoFollow(p string) (*os.File, error) {
	return os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
}
