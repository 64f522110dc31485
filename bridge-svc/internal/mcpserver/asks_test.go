package mcpserver_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sharedos/toolshare/bridge-svc/internal/forward"
	"github.com/sharedos/toolshare/bridge-svc/internal/leases"
	"github.com/sharedos/toolshare/bridge-svc/internal/leases/memory"
	"github.com/sharedos/toolshare/bridge-svc/internal/mcpserver"
)

// relayStore is a memory store that relays answers between pods as the
// PostgreSQL store does (leases.Answers), keeping the id of every answer
// passed to it; no other pod ever takes one.
type relayStore struct {
	*memory.Store

	mu     sync.Mutex
	passed []string
}

var _ leases.Answers = (*relayStore)(nil)

func (s *relayStore) PassAnswer(_ context.Context, a leases.Answer) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.passed = append(s.passed, string(a.ID))
	return nil
}

func (s *relayStore) TakeAnswer(context.Context, []byte) (leases.Answer, error) {
	return leases.Answer{}, leases.ErrNotFound
}

func (s *relayStore) WatchAnswers(ctx context.Context, listening func(), _ func([]byte)) error {
	listening()
	<-ctx.Done()
	return nil
}

func (s *relayStore) passes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.passed...)
}

// TestOnlyAnswersToIDsTheBridgeMintsArePassedOn: a 2025-era client's
// answer this pod does not wait for is passed on to the other pods only
// when its id has the shape of the input request ids the bridge mints
// ("sharedos-ask-" and 32 lowercase hex digits). An id of any other shape
// is none of the bridge's requests, whatever its prefix: it is answered as
// an answer to a request nobody made is, and never reaches the store,
// which keys and announces answers by their ids (an id of 9,000 bytes
// failed the announcement, and the client got 503 for a store outage).
func TestOnlyAnswersToIDsTheBridgeMintsArePassedOn(t *testing.T) {
	store := &relayStore{Store: memory.New()}
	mux := serve(mcpserver.Config{Store: store, Forwarder: &forward.Forwarder{}})
	l, token := createLease(t, store, time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
	init := post(mux, l.TurnID, token, legacyInitialize, nil)
	sid := init.Header().Get("Mcp-Session-Id")
	if init.Code != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %s", init.Code, init.Body)
	}
	answer := func(id string) (int, string) {
		w := post(mux, l.TurnID, token, `{"jsonrpc":"2.0","id":`+id+`,"result":{"action":"accept"}}`,
			map[string]string{"Mcp-Protocol-Version": "2025-11-25", "Mcp-Session-Id": sid})
		return w.Code, strings.ReplaceAll(w.Body.String(), id, "ID")
	}

	minted := `"sharedos-ask-` + strings.Repeat("0123456789abcdef", 2) + `"`
	if code, body := answer(minted); code != http.StatusAccepted || len(store.passes()) != 1 || store.passes()[0] != minted {
		t.Fatalf("an answer to an id of the minted shape: %d %s, passed %q; want 202 and the answer passed on", code, body, store.passes())
	}
	unknownCode, unknownBody := answer(`"someone-else"`)
	t.Logf("an answer to an id the bridge never mints: %d %q", unknownCode, unknownBody)
	for name, id := range map[string]string{
		"9,000 bytes":             `"sharedos-ask-` + strings.Repeat("a", 9000) + `"`,
		"uppercase hex":           `"sharedos-ask-` + strings.Repeat("0123456789ABCDEF", 2) + `"`,
		"31 hex digits":           `"sharedos-ask-` + strings.Repeat("a", 31) + `"`,
		"33 hex digits":           `"sharedos-ask-` + strings.Repeat("a", 33) + `"`,
		"a letter past f":         `"sharedos-ask-` + strings.Repeat("a", 31) + `g"`,
		"an escape in the digits": `"sharedos-ask-` + strings.Repeat("a", 30) + `\u0061"`,
	} {
		code, body := answer(id)
		if code != unknownCode || body != unknownBody {
			t.Errorf("an answer to an id of %s: %d %q, want %d %q as for any id the bridge never mints", name, code, body, unknownCode, unknownBody)
		}
	}
	if got := store.passes(); len(got) != 1 {
		t.Fatalf("passed on %d answers, want only the one to the minted id", len(got))
	}
}
