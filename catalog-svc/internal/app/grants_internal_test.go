package app

import (
	"errors"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/platform/mtls/pki"

	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline/grants"
)

// On the embedded store a turn grant ends with the kernel process that
// issued it, also under a --grant-key kept across restarts (review D2): the
// store's revocations and the call ids a turn ran live in process memory,
// so a grant from before a restart would let a closed turn call again and
// a call id run twice. On PostgreSQL, where both are durable, a grant
// verifies on every replica and after a restart.
func TestGrantsEndWithAnEmbeddedStoresProcess(t *testing.T) {
	key := filepath.Join(t.TempDir(), "grant.key")
	if err := pki.WriteSigningKey(key); err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	now := time.Now()
	g := grants.Grant{TurnID: "turn-1", Context: &sharedosv1.AccessContext{Principal: "alice"}, ExpiresAt: now.Add(time.Hour)}
	for _, tc := range []struct {
		name, db string
		ended    bool
	}{
		{"embedded store", "", true},
		{"PostgreSQL", "postgres://db/sharedos", false},
	} {
		cfg := Config{GrantKey: key, DatabaseURL: tc.db}
		before, err := cfg.grantKeys(quiet)
		if err != nil {
			t.Fatal(err)
		}
		tok, err := before.Issue(g, now)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := before.Verify(tok, g.TurnID, now); err != nil {
			t.Fatalf("%s: the issuing process refuses its grant: %v", tc.name, err)
		}
		after, err := cfg.grantKeys(quiet) // the kernel restarted with the same key
		if err != nil {
			t.Fatal(err)
		}
		_, err = after.Verify(tok, g.TurnID, now)
		if tc.ended && !errors.Is(err, grants.ErrEnded) {
			t.Errorf("%s: a grant from before the restart: %v, want %v", tc.name, err, grants.ErrEnded)
		}
		if !tc.ended && err != nil {
			t.Errorf("%s: a grant from before the restart refused: %v", tc.name, err)
		}
	}
}
