package specvectors

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// Read returns the in-repo copy of the spec file name. Paths are relative to
// the calling test's package directory, which must be directly under
// services/contract (every user is).
func Read(tb testing.TB, name string) []byte {
	tb.Helper()
	local, err := os.ReadFile(filepath.Join("..", "testdata", name))
	if err != nil {
		tb.Fatalf("read testdata copy: %v", err)
	}
	spec := filepath.Join("..", "..", "..", "..", "shared", "spec", name)
	if upstream, err := os.ReadFile(spec); err == nil {
		if !bytes.Equal(local, upstream) {
			tb.Fatalf("services/contract/testdata/%s differs from %s; copy the spec file again", name, spec)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		tb.Fatalf("read %s: %v", spec, err)
	}
	return local
}
