package upstream

import (
	"os"
	"slices"
	"strconv"
	"strings"
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
	if env, err := childEnv(nil); err != nil || env == nil || len(env) != 0 {
		t.Errorf("childEnv with nothing to pass = %#v, %v, want an empty, non-nil list", env, err)
	}
}

// A header that Validate refuses a stdio server (no variable name, or one
// that loads code) starts no server, whenever its provider was stored:
// childEnv refuses it, naming it, and hands out no environment.
func TestChildEnvRefusesWhatValidateRefuses(t *testing.T) {
	for _, name := range []string{"BASH_FUNC_dirname%%", "UV_INDEX_URL", "PIP_INDEX_URL", "LD_PRELOAD", "NODE_OPTIONS", "PATH", "1X"} {
		env, err := childEnv(map[string]string{"GITHUB_TOKEN": "t", name: "() { id; }"})
		if err == nil || !strings.Contains(err.Error(), strconv.Quote(name)) || env != nil {
			t.Errorf("childEnv with header %s = %q, %v, want it refused", name, env, err)
		}
	}
	env, err := childEnv(map[string]string{"GITHUB_TOKEN": "t", "Authorization": "Bearer x"})
	if err != nil || !slices.Contains(env, "GITHUB_TOKEN=t") || slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "Authorization=") }) {
		t.Errorf("childEnv with a variable and the credential = %q, %v", env, err)
	}
}
