package requeststate_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/platform/mtls/pki"

	"github.com/sharedos/toolshare/bridge-svc/internal/requeststate"
)

func sample(now time.Time) requeststate.State {
	return requeststate.State{TurnID: "turn-a", AttemptID: "0123456789abcdef0123456789abcdef", Round: 2, Kind: sharedosv1.CallKind_CALL_KIND_PROMPT,
		Tool: "files.read", ArgumentsDigest: "sha256:abc", ExpiresAt: now.Add(time.Minute), Provider: []byte("opaque\x00state")}
}

// TestSealOpen: a sealed state opens for its turn until it expires, with
// everything it carried; it is refused altered, cut, for another turn,
// expired, or under another key — and its text says nothing of its content.
func TestSealOpen(t *testing.T) {
	now := time.Now()
	s, err := requeststate.Generate()
	if err != nil {
		t.Fatal(err)
	}
	tok, err := s.Seal(sample(now))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(tok, "files") || strings.Contains(tok, "turn-a") {
		t.Fatalf("sealed state %q shows its content", tok)
	}
	got, err := s.Open(tok, "turn-a", now)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	want := sample(now)
	if got.AttemptID != want.AttemptID || got.Round != 2 || got.Kind != want.Kind || got.Tool != want.Tool || got.ArgumentsDigest != want.ArgumentsDigest ||
		string(got.Provider) != string(want.Provider) || !got.ExpiresAt.Equal(want.ExpiresAt) {
		t.Fatalf("opened %+v, want %+v", got, want)
	}
	flip := []byte(tok)
	flip[len(flip)/2] ^= 1
	other, _ := requeststate.Generate()
	for name, c := range map[string]struct {
		tok, turn string
		at        time.Time
		s         *requeststate.Sealer
		want      error
	}{
		"suffixed":     {tok + "-TAMPERED", "turn-a", now, s, requeststate.ErrSeal},
		"one bit":      {string(flip), "turn-a", now, s, requeststate.ErrSeal},
		"cut":          {tok[:len(tok)-4], "turn-a", now, s, requeststate.ErrSeal},
		"empty":        {"", "turn-a", now, s, requeststate.ErrSeal},
		"another turn": {tok, "turn-b", now, s, requeststate.ErrSeal},
		"another key":  {tok, "turn-a", now, other, requeststate.ErrSeal},
		"expired":      {tok, "turn-a", now.Add(time.Minute), s, requeststate.ErrExpired},
		"huge":         {"s1." + strings.Repeat("A", requeststate.MaxBytes), "turn-a", now, s, requeststate.ErrSeal},
	} {
		if _, err := c.s.Open(c.tok, c.turn, c.at); !errors.Is(err, c.want) || !errors.Is(err, requeststate.ErrInvalid) {
			t.Errorf("%s: Open = %v, want %v", name, err, c.want)
		}
	}
	again, _ := s.Seal(sample(now))
	if again == tok {
		t.Error("two seals of one state are equal: the nonce is not fresh")
	}
}

// TestLoadAndRotate: a key file seals for every pod that loads it; a
// retired key still opens what it sealed.
func TestLoadAndRotate(t *testing.T) {
	dir := t.TempDir()
	oldKey, newKey := filepath.Join(dir, "old.key"), filepath.Join(dir, "new.key")
	for _, f := range []string{oldKey, newKey} {
		if err := pki.WriteSigningKey(f); err != nil {
			t.Fatal(err)
		}
	}
	podA, err := requeststate.Load(oldKey)
	if err != nil {
		t.Fatal(err)
	}
	podB, err := requeststate.Load(oldKey)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tok, _ := podA.Seal(sample(now))
	if _, err := podB.Open(tok, "turn-a", now); err != nil {
		t.Fatalf("another pod with the same key: %v", err)
	}
	rotated, err := requeststate.Load(newKey, oldKey)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rotated.Open(tok, "turn-a", now); err != nil {
		t.Fatalf("retired key: %v", err)
	}
	fresh, _ := requeststate.Load(newKey)
	if _, err := fresh.Open(tok, "turn-a", now); !errors.Is(err, requeststate.ErrSeal) {
		t.Fatalf("without the retired key: %v, want ErrSeal", err)
	}
	if _, err := requeststate.Load(filepath.Join(dir, "missing.key")); err == nil {
		t.Fatal("Load of a missing file succeeded")
	}
}
