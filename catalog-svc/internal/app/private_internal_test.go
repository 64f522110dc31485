package app

import (
	"slices"
	"strings"
	"testing"

	"github.com/sharedos/toolshare/services/platform/secretref"
)

// A stdio upstream's process is kept from the directories of the kernel's
// keys (a key directly in / on its own), its journal and its upstreams'
// secret directories.
func TestStdioServersPrivatePaths(t *testing.T) {
	scope, err := secretref.ParseScope([]string{"env:GH_*", "file:/etc/upstream-secrets/"})
	if err != nil {
		t.Fatal(err)
	}
	c := Config{GrantKey: "/etc/sharedos/grants/current/tls.key", GrantRetiredKeys: []string{"/old.pem"}, RecordJournalDir: "/var/lib/sharedos/journal"}
	want := []string{"/etc/sharedos/grants/current", "/old.pem", "/var/lib/sharedos/journal", "/etc/upstream-secrets/"}
	if got := c.private(scope); !slices.Equal(got, want) {
		t.Errorf("private %q, want %q", got, want)
	}
}

// A file: directory of --upstream-credentials may neither hold nor lie in
// a directory of the kernel's own keys or its journal: an operator names
// an upstream's credential, and would send that key to the upstream
// (review finding). One beside them is taken.
func TestUpstreamCredentialsKeepOutOfTheKernelsOwn(t *testing.T) {
	base := Config{Listen: ":0", AuthzAddr: "a:1", AuthzTimeout: 1, DefaultHandlerTimeout: 1, ReconcileInterval: 1,
		GrantKey: "/etc/sharedos/grants/current/tls.key", RecordJournalDir: "/var/lib/sharedos/journal", DatabaseURL: "postgres://db/sharedos"}
	for _, dir := range []string{"file:/etc/", "file:/etc/sharedos/grants/", "file:/etc/sharedos/grants/current/", "file:/etc/sharedos/grants/current/sub/",
		"file:/var/lib/sharedos/", "file:/var/lib/sharedos/journal/x/"} {
		c := base
		c.UpstreamCredentials = []string{dir}
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "upstream-credentials") {
			t.Errorf("--upstream-credentials %s: %v", dir, err)
		}
	}
	c := base
	c.UpstreamCredentials = []string{"file:/etc/upstream-secrets/", "file:/etc/sharedos/upstreams/"}
	if err := c.Validate(); err != nil {
		t.Errorf("directories beside the kernel's own: %v", err)
	}
}
