package mcpserver_test

import (
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/sharedos/toolshare/bridge-svc/internal/protocol"
)

// filled is prefix, then copies of elem, comma-separated, then suffix:
// size bytes or a few less.
func filled(prefix, elem, suffix string, size int) string {
	n := (size - len(prefix) - len(suffix)) / (len(elem) + 1)
	return prefix + strings.TrimSuffix(strings.Repeat(elem+",", n), ",") + suffix
}

// allocated is what serving one request allocated, in bytes.
func allocated(serve func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	serve()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestWhatDecodingCostsIsBoundedBeforeMCPGo (attack run D1): a request
// whose params._meta, or whose arguments, are megabytes of empty objects
// made mcp-go decode them into map[string]any — _meta about five times per
// request — and a 4 MiB one cost the bridge 830 MB (a ping's _meta, a
// tools/call's) or 224 MB (a tools/call's arguments). The bridge's parse
// now bounds _meta to protocol.MaxMetaBytes and params to
// protocol.MaxValues values, protocol.MaxContainers of them objects or
// arrays: such a request is refused -32602 (HTTP 200 on a 2025-era
// session, 400 on 2026-07-28), a tools/call recorded as any refused
// attempt, and serving it allocates a few times its body. A call at the
// bound is served, at a cost of the same order.
func TestWhatDecodingCostsIsBoundedBeforeMCPGo(t *testing.T) {
	k, mux, l, token, sid := legacySession(t)
	legacy := map[string]string{"Mcp-Protocol-Version": "2025-11-25", "Mcp-Session-Id": sid}
	modern := map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "files.read"}
	const (
		size       = protocol.DefaultMaxBodyBytes - 1024
		call       = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"files.read","arguments":`
		modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}`
		// Before the bounds the smallest of these cost 190 MB.
		bound = 64 << 20
	)
	for _, tc := range []struct {
		name, body string
		headers    map[string]string
		status     int
		refused    bool
		records    int
	}{
		{"a ping's _meta of empty objects", filled(`{"jsonrpc":"2.0","id":2,"method":"ping","params":{"_meta":{"a":[`, `{}`, `]}}}`, size), legacy, http.StatusOK, true, 0},
		{"a tools/call's _meta of empty objects", filled(call+`{"path":"/public/a.txt"},"_meta":{"a":[`, `{}`, `]}}}`, size), legacy, http.StatusOK, true, 1},
		{"arguments of empty objects", filled(call+`{"a":[`, `{}`, `]}}}`, size), legacy, http.StatusOK, true, 1},
		{"arguments of empty arrays", filled(call+`{"a":[`, `[]`, `]}}}`, size), legacy, http.StatusOK, true, 1},
		{"arguments of ones", filled(call+`{"a":[`, `1`, `]}}}`, size), legacy, http.StatusOK, true, 1},
		{"2026-07-28 _meta of empty objects", filled(call+`{"path":"/public/a.txt"},`+modernMeta+`,"a":[`, `{}`, `]}}}`, size), modern, http.StatusBadRequest, true, 1},
		{"2026-07-28 arguments of empty objects", filled(call+`{"a":[`, `{}`, `]},`+modernMeta+`}}}`, size), modern, http.StatusBadRequest, true, 1},
		{"arguments of ones at the bound", call + `{"a":[` + strings.TrimSuffix(strings.Repeat("1,", protocol.MaxValues-4), ",") + `]}}}`, legacy, http.StatusOK, false, 1},
		{"a 3 MiB string", call + `{"a":"` + strings.Repeat("x", 3<<20) + `"}}}`, legacy, http.StatusOK, false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := k.sent()
			var w *httptest.ResponseRecorder
			cost := allocated(func() { w = post(mux, l.TurnID, token, tc.body, tc.headers) })
			t.Logf("%d-byte body: HTTP %d, %.1f MB allocated", len(tc.body), w.Code, float64(cost)/1e6)
			if got := strings.Contains(w.Body.String(), `"code":-32602`); w.Code != tc.status || got != tc.refused {
				t.Errorf("answered %d %.200s; want %d, refused -32602: %v", w.Code, w.Body, tc.status, tc.refused)
			}
			calls := k.since(before)
			if len(calls) != tc.records || (tc.records == 1 && (calls[0].GetEdgeRejection() != "") != tc.refused) {
				t.Errorf("the kernel saw %d calls (%v); want %d, a refusal recorded as one: %v", len(calls), calls, tc.records, tc.refused)
			}
			if cost > bound {
				t.Errorf("serving it allocated %d MB, want at most %d", cost>>20, bound>>20)
			}
		})
	}
}
