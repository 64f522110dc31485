package leases_test

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/sharedos/toolshare/bridge-svc/internal/leases"
)

// TestMint100kWithoutCollision mints 10^5 turn ids and tokens: no repeat,
// every token 256 bits (32 random bytes), every id of the validated shape,
// and no token derivable from its turn id (they never share a prefix
// beyond chance).
func TestMint100kWithoutCollision(t *testing.T) {
	const n = 100_000
	ids := make(map[string]struct{}, n)
	tokens := make(map[string]struct{}, n)
	for i := range n {
		id, err := leases.NewTurnID()
		if err != nil {
			t.Fatal(err)
		}
		tok, hash, err := leases.NewToken()
		if err != nil {
			t.Fatal(err)
		}
		if !leases.ValidTurnID(id) {
			t.Fatalf("turn id %q has not the validated shape", id)
		}
		raw, err := base64.RawURLEncoding.DecodeString(tok)
		if err != nil || len(raw) != 32 {
			t.Fatalf("token %d is not 32 bytes of base64url: %v", i, err)
		}
		if hash != leases.HashToken(tok) || !leases.TokenMatches(tok, hash) {
			t.Fatal("stored hash does not match the token")
		}
		if strings.HasPrefix(tok, id[1:9]) {
			t.Fatalf("token %q starts like its turn id %q", tok, id)
		}
		if _, dup := ids[id]; dup {
			t.Fatalf("turn id collision after %d: %s", i, id)
		}
		if _, dup := tokens[tok]; dup {
			t.Fatalf("token collision after %d", i)
		}
		ids[id], tokens[tok] = struct{}{}, struct{}{}
	}
}
