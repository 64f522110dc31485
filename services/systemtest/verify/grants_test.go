//go:build verify

package verify

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/callers"
	"github.com/sharedos/toolshare/services/contract/outcome"
	"github.com/sharedos/toolshare/services/platform/grpcx"
)

// grantOf reads a turn's grant where a bridge pod keeps it: an attacker
// holding a bridge pod has exactly this.
func (s *stack) grantOf(t *testing.T, turnID string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var g string
	if err := s.db.QueryRow(ctx, `SELECT grant_token FROM bridge.leases WHERE turn_id = $1`, turnID).Scan(&g); err != nil || g == "" {
		t.Fatalf("grant of %s: %q, %v", turnID, g, err)
	}
	return g
}

// kernelAsBridge is a RuntimeService client with a bridge identity of the
// stack's CA: what a compromised bridge pod can call.
func (s *stack) kernelAsBridge(t *testing.T) sharedosv1.RuntimeServiceClient {
	t.Helper()
	creds := s.Credentials(t, s.Identity(t, "rogue-bridge", callers.Bridge, "rogue"))
	cc, err := grpcx.Dial(s.Addrs["catalog"], creds.DialOption(callers.Catalog))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return sharedosv1.NewRuntimeServiceClient(cc)
}

// TestGrantsAreTheOnlyAuthority: with a bridge identity, a caller still
// cannot choose a call's context or pin. Invented turns, forged, altered
// and other-turn grants are refused invalid_grant — each attempt recorded
// under the turn it named — and no handler runs. The engineer's real grant
// still works, for the engineer's rights only.
func TestGrantsAreTheOnlyAuthority(t *testing.T) {
	s := startStack(t, stackOptions{})
	victim, other := s.open("alice"), s.open("bob")
	kernel := s.kernelAsBridge(t)
	real := s.grantOf(t, victim.ID)

	parts := strings.Split(real, ".")
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	altered := parts[0] + "." + base64.RawURLEncoding.EncodeToString(
		[]byte(strings.Replace(string(payload), `"alice"`, `"admin"`, 1))) + "." + parts[2]

	// A grant of the attacker's own key, naming the kernel's key id.
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	hdr, _ := base64.RawURLEncoding.DecodeString(parts[0])
	kid := strings.Split(strings.Split(string(hdr), `"kid":"`)[1], `"`)[0]
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader(jose.HeaderKey("kid"), kid))
	if err != nil {
		t.Fatal(err)
	}
	forged, err := jwt.Signed(signer).Claims(map[string]any{
		"iss": "sharedos-kernel", "aud": []string{"sharedos-kernel"}, "exp": time.Now().Add(time.Hour).Unix(),
		"tid": victim.ID, "ctx": map[string]any{"principal": "admin", "roles": []string{"admin"}},
		"pin": map[string]string{},
	}).Serialize()
	if err != nil {
		t.Fatal(err)
	}

	before := s.provider.handled.Load()
	attempts := []struct{ name, turn, grant string }{
		{"invented turn, no grant", "t-invented", ""},
		{"real turn, no grant", victim.ID, ""},
		{"forged", victim.ID, forged},
		{"altered", victim.ID, altered},
		{"another turn's grant", other.ID, real},
	}
	for i, a := range attempts {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		res, err := kernel.InvokeTool(ctx, &sharedosv1.ToolCall{
			CallId: "attack-" + string(rune('a'+i)), TurnId: a.turn, Tool: "verify.echo",
			ArgumentsJson: []byte(`{"path":"/private/secret.txt"}`), Grant: a.grant, Harness: "attacker",
		})
		cancel()
		if err != nil {
			t.Fatalf("%s: %v", a.name, err)
		}
		if res.GetStatus() != sharedosv1.OperationStatus_OPERATION_STATUS_DENIED || res.GetCode() != outcome.InvalidGrant {
			t.Errorf("%s: %v/%s (%s), want denied/invalid_grant", a.name, res.GetStatus(), res.GetCode(), res.GetReason())
		}
	}
	if n := s.provider.handled.Load() - before; n != 0 {
		t.Fatalf("a handler ran %d times for refused grants", n)
	}
	for turn, want := range map[string]int{"t-invented": 1, victim.ID: 3, other.ID: 1} {
		rows := s.ops(turn)
		if len(rows) != want {
			t.Errorf("turn %s: %d records, want %d", turn, len(rows), want)
		}
		for _, r := range rows {
			if r.Status != "denied" || r.Code != outcome.InvalidGrant {
				t.Errorf("turn %s: record %+v", turn, r)
			}
		}
	}
	// The real grant carries alice's rights, no more.
	expectOutcome(t, mustCall(t, victim, "verify.echo", `{"path":"/public/x"}`), "succeeded", "")
}

// TestCloseTurnRevokesEverywhere: a call running when its turn is closed is
// cancelled and recorded cancelled before CloseTurn returns, and after it no
// handler of the turn starts — not even for a caller holding the turn's
// grant and a bridge identity.
func TestCloseTurnRevokesEverywhere(t *testing.T) {
	s := startStack(t, stackOptions{})
	tr := s.open("alice")
	grant := s.grantOf(t, tr.ID)
	kernel := s.kernelAsBridge(t)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan callResult, 1)
	go func() { done <- callTool(ctx, tr.URL, tr.Token, "verify.slow", `{"path":"/public/x","ms":20000}`) }()
	select {
	case <-s.provider.started:
	case <-ctx.Done():
		t.Fatal("verify.slow did not start")
	}
	closedAt := time.Now()
	s.closeTurn(tr.ID)
	took := time.Since(closedAt)
	rows := s.ops(tr.ID)
	if len(rows) != 1 || rows[0].Status != "cancelled" || rows[0].Reason != "the turn was closed" {
		t.Fatalf("records when CloseTurn returned = %+v, want the running call cancelled", rows)
	}
	<-done
	handled := s.provider.handled.Load()
	res, err := kernel.InvokeTool(ctx, &sharedosv1.ToolCall{
		CallId: "after-close", TurnId: tr.ID, Tool: "verify.echo", ArgumentsJson: []byte(`{"path":"/public/x"}`),
		Grant: grant, Harness: "attacker",
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.GetStatus() != sharedosv1.OperationStatus_OPERATION_STATUS_DENIED || res.GetCode() != outcome.InvalidGrant ||
		res.GetReason() != "the turn was closed" {
		t.Fatalf("a call of the closed turn = %v/%s (%s)", res.GetStatus(), res.GetCode(), res.GetReason())
	}
	if s.provider.handled.Load() != handled {
		t.Fatal("a handler of a closed turn started")
	}
	if rows := s.ops(tr.ID); len(rows) != 2 || rows[1].Code != outcome.InvalidGrant {
		t.Fatalf("records = %+v, want the refused call recorded", rows)
	}
	t.Logf("CloseTurn with one call in flight took %s", took.Round(time.Millisecond))
}
