package mcpserver_test

import (
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sharedos/toolshare/bridge-svc/internal/forward"
	"github.com/sharedos/toolshare/bridge-svc/internal/leases"
	"github.com/sharedos/toolshare/bridge-svc/internal/leases/memory"
	"github.com/sharedos/toolshare/bridge-svc/internal/mcpserver"
	"github.com/sharedos/toolshare/bridge-svc/internal/protocol"
)

const legacyInitialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// serve is the bridge's MCP handler for cfg on its route, behind the
// default edge when cfg names none.
func serve(cfg mcpserver.Config) http.Handler {
	if cfg.Edge == nil {
		cfg.Edge = protocol.NewEdge(protocol.EdgeConfig{AllowedHosts: protocol.DefaultAllowedHosts})
	}
	mux := http.NewServeMux()
	mux.Handle(mcpserver.Pattern, mcpserver.NewHandler(cfg))
	return mux
}

// sessionTurn is a handler over the memory store with one open turn.
func sessionTurn(t *testing.T, cfg mcpserver.Config) (http.Handler, *leases.Lease, string) {
	t.Helper()
	store := memory.New()
	cfg.Store, cfg.Forwarder = store, &forward.Forwarder{}
	cfg.Edge = nil
	l, token := createLease(t, store, time.Now(), time.Now().Add(time.Hour))
	return serve(cfg), l, token
}

func post(h http.Handler, turnID, token, body string, headers map[string]string) *httptest.ResponseRecorder {
	return postFrom(h, "192.0.2.1:1234", turnID, token, body, headers)
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestLegacySessionsAreNotKept: 20,000 2025-era initializes on one turn
// leave the bridge's heap where it was (issue 17 item 8: it grew by
// ≈10 KiB per initialize, 249 MB for 20,000, before sessions were
// forgotten), and each session id still works for the requests after it.
func TestLegacySessionsAreNotKept(t *testing.T) {
	const n = 20_000
	h, l, token := sessionTurn(t, mcpserver.Config{InitializeRate: 1e9, InitializeBurst: n})
	if w := post(h, l.TurnID, token, legacyInitialize, nil); w.Code != 200 {
		t.Fatalf("first initialize: %d %s", w.Code, w.Body)
	}
	before := heapInUse()
	var sid string
	for i := range n {
		w := post(h, l.TurnID, token, legacyInitialize, nil)
		if w.Code != 200 {
			t.Fatalf("initialize %d: %d %s", i, w.Code, w.Body)
		}
		sid = w.Header().Get("Mcp-Session-Id")
	}
	grown := int64(heapInUse()) - int64(before)
	t.Logf("heap after %d initializes: %+d bytes (%.1f per initialize)", n, grown, float64(grown)/n)
	if grown > 16<<20 {
		t.Errorf("heap grew by %d bytes over %d initializes: sessions are kept", grown, n)
	}
	session := map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"}
	if w := post(h, l.TurnID, token, `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`, session); w.Code != 200 || !strings.Contains(w.Body.String(), `"tools"`) {
		t.Fatalf("tools/list on the last session: %d %s", w.Code, w.Body)
	}
}

// TestInitializeIsRateLimitedPerTurn: past its burst a turn's initializes
// are refused 429 with Retry-After, and another turn is untouched.
func TestInitializeIsRateLimitedPerTurn(t *testing.T) {
	h, l, token := sessionTurn(t, mcpserver.Config{InitializeRate: 0.001, InitializeBurst: 3})
	var sid string
	for i := range 3 {
		w := post(h, l.TurnID, token, legacyInitialize, nil)
		if w.Code != 200 {
			t.Fatalf("initialize %d within the burst: %d %s", i, w.Code, w.Body)
		}
		sid = w.Header().Get("Mcp-Session-Id")
	}
	w := post(h, l.TurnID, token, legacyInitialize, nil)
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "" {
		t.Fatalf("initialize past the burst: %d %q", w.Code, w.Header().Get("Retry-After"))
	}
	session := map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"}
	if w := post(h, l.TurnID, token, `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`, session); w.Code != 200 {
		t.Fatalf("tools/list on a turn out of initializes: %d %s", w.Code, w.Body)
	}
}
