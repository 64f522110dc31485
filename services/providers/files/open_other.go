//go:build !linux

package files

import (
	"errors"
	"fmt"
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

// replace writes content to t in place (the Linux build writes a new file
// and renames it over the old one). No O_TRUNC at open: the file is
// checked first (fstat of what was opened). O_NONBLOCK refuses a FIFO
// without a reader (ENXIO) instead of blocking the call.
func (p *Provider) replace(t target, content string) (int, error) {
	f, err := p.openBeneath(t.rel, os.O_WRONLY|os.O_CREATE|syscall.O_NONBLOCK, 0o644)
	if err != nil {
		switch {
		case errors.Is(err, syscall.EISDIR):
			return 0, fmt.Errorf("is a directory: %s", t.display)
		case errors.Is(err, syscall.ENXIO):
			return 0, fmt.Errorf("not a regular file: %s", t.display)
		}
		return 0, describe(t.display, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, describe(t.display, err)
	}
	if !fi.Mode().IsRegular() {
		return 0, fmt.Errorf("not a regular file: %s", t.display)
	}
	if hardLinked(fi) {
		return 0, fmt.Errorf("refused: %s has other hard links; it is not written", t.display)
	}
	n, err := overwrite(f, content)
	if err := errors.Join(err, f.Close()); err != nil {
		return 0, fmt.Errorf("write failed: %s", t.display)
	}
	return n, nil
}
