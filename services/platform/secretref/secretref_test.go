package secretref_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/sharedos/toolshare/services/platform/secretref"
)

func TestResolve(t *testing.T) {
	t.Setenv("SECRETREF_TEST", "from-env")
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for ref, want := range map[string]string{"env:SECRETREF_TEST": "from-env", "SECRETREF_TEST": "from-env", "file:" + file: "from-file"} {
		if got, err := secretref.Resolve(ref); err != nil || got != want {
			t.Errorf("Resolve(%q) = %q, %v; want %q", ref, got, err, want)
		}
	}
	for _, bad := range []string{"", "env:", "file:relative", "a=b", "http://x", "two words"} {
		if _, err := secretref.Resolve(bad); err == nil {
			t.Errorf("Resolve(%q) accepted a malformed reference", bad)
		}
	}
	if _, err := secretref.Resolve("env:SECRETREF_UNSET_FOR_TEST"); !errors.Is(err, secretref.ErrEmpty) {
		t.Errorf("an unset variable: %v, want ErrEmpty", err)
	}
}
