package app

import (
	"slices"
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
