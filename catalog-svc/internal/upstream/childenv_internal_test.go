package upstream

import (
	"os"
	"testing"
)

// A stdio server's environment is what childEnv lists, also when that is
// nothing: a nil list would hand exec.Cmd this process's whole
// environment (its database URL among it).
func TestChildEnvNeverInherits(t *testing.T) {
	for _, k := range []string{"PATH", "HOME", "LANG", "TMPDIR"} {
		t.Setenv(k, "") // restored after the test
		if err := os.Unsetenv(k); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("SHAREDOS_DATABASE_URL", "postgres://secret@db/x")
	if env := childEnv(nil); env == nil || len(env) != 0 {
		t.Errorf("childEnv with nothing to pass = %#v, want an empty, non-nil list", env)
	}
}
