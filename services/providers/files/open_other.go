//go:build !linux

package files

import (
	"os"
	"syscall"
)

// openBeneath opens rel through os.Root, which confines to the root (the
// Linux build also refuses in-root symbolic links at open time, openat2).
func (p *Provider) openBeneath(rel string, flag int, perm os.FileMode) (*os.File, error) {
	return p.root.OpenFile(rel, flag|syscall.O_NOFOLLOW, perm)
}

// opensBeneath is false off Linux: os.Root follows links inside the root,
// so resolve walks every path with Lstat first.
func (p *Provider) opensBeneath() bool { return false }
