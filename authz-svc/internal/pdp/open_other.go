//go:build !unix

package pdp

import "os"

// openNoFollow opens p for reading (readRegular checks what was opened).
func openNoFollow(p string) (*os.File, error) { return os.Open(p) }
