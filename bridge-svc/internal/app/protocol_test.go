package app_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestTheBridgesOwnAnswersCheckTheVersion: the 2025-era requests the
// bridge answers itself, without mcp-go — resources/subscribe and
// unsubscribe, DELETE of a session, a request on an ended session — are
// refused 400 when their Mcp-Protocol-Version header names a version the
// turn does not serve (2025-11-25 transports: MUST), as mcp-go refuses
// the others; a refused DELETE ends nothing. A subscribe without its URI
// is invalid params (-32602). Before, a subscribe under 1999-01-01 was
// acknowledged 200 {} and a DELETE under it ended the session; a
// subscribe without params.uri was acknowledged too.
func TestTheBridgesOwnAnswersCheckTheVersion(t *testing.T) {
	f := newFixture(t)
	tr := f.bridge.Open(t)
	session := legacySession(t, tr)
	bad := map[string]string{"Mcp-Session-Id": session["Mcp-Session-Id"], "Mcp-Protocol-Version": "1999-01-01"}
	subscribe := func(id, method, params string, headers map[string]string) rawResp {
		return do(t, rawReq{url: tr.GetMcpUrl(), token: tr.GetToken(), headers: headers,
			body: `{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `","params":` + params + `}`})
	}
	for _, method := range []string{"resources/subscribe", "resources/unsubscribe"} {
		if r := subscribe("2", method, `{"uri":"test://static-text"}`, bad); r.status != http.StatusBadRequest {
			t.Errorf("%s under version 1999-01-01: %d %s, want 400", method, r.status, r.body)
		}
		if r := subscribe("3", method, `{}`, session); r.status != http.StatusOK || !strings.Contains(string(r.body), `"code":-32602`) {
			t.Errorf("%s without params.uri: %d %s, want a -32602 error", method, r.status, r.body)
		}
		if r := subscribe("4", method, `{"uri":"test://static-text"}`, session); r.status != http.StatusOK || !strings.Contains(string(r.body), `"result":{}`) {
			t.Errorf("%s: %d %s, want it acknowledged", method, r.status, r.body)
		}
	}
	before := len(f.kernel.Calls())
	call := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"files.read","arguments":{"path":"/public/a.txt"}}}`
	if r := do(t, rawReq{url: tr.GetMcpUrl(), token: tr.GetToken(), body: call, headers: bad}); r.status != http.StatusBadRequest {
		t.Errorf("a tools/call under version 1999-01-01: %d %s, want 400", r.status, r.body)
	}
	if calls := f.kernel.Calls()[before:]; len(calls) != 1 || calls[0].GetEdgeRejection() == "" || calls[0].GetTool() != "files.read" {
		t.Errorf("kernel saw %v, want the refused call's one record-only rejection", calls)
	}
	if r := do(t, rawReq{method: http.MethodDelete, url: tr.GetMcpUrl(), token: tr.GetToken(), headers: bad}); r.status != http.StatusBadRequest {
		t.Errorf("DELETE under version 1999-01-01: %d %s, want 400", r.status, r.body)
	}
	if r := do(t, rawReq{url: tr.GetMcpUrl(), token: tr.GetToken(), body: legacyList(6), headers: session}); r.status != http.StatusOK {
		t.Fatalf("the session after a refused DELETE: %d %s, want it still open", r.status, r.body)
	}
	if r := do(t, rawReq{method: http.MethodDelete, url: tr.GetMcpUrl(), token: tr.GetToken(), headers: session}); r.status != http.StatusOK {
		t.Fatalf("DELETE: %d %s", r.status, r.body)
	}
	before = len(f.kernel.Calls())
	if r := do(t, rawReq{url: tr.GetMcpUrl(), token: tr.GetToken(), body: call, headers: bad}); r.status != http.StatusBadRequest {
		t.Errorf("a tools/call on the ended session under version 1999-01-01: %d %s, want 400", r.status, r.body)
	}
	if calls := f.kernel.Calls()[before:]; len(calls) != 1 || calls[0].GetEdgeRejection() == "" {
		t.Errorf("kernel saw %v, want one record-only rejection", calls)
	}
}

// TestADeleteWithoutASessionIsABadRequest: a 2025-era DELETE without
// Mcp-Session-Id ends nothing and is answered 400 (2025-11-25 transports:
// a request without the session id it needs SHOULD get 400). Before, mcp-go
// asked the session manager to end "" and answered its refusal 500
// ("Session termination failed").
func TestADeleteWithoutASessionIsABadRequest(t *testing.T) {
	f := newFixture(t)
	tr := f.bridge.Open(t)
	session := legacySession(t, tr)
	for _, headers := range []map[string]string{nil, {"Mcp-Protocol-Version": "2025-11-25"}} {
		if r := do(t, rawReq{method: http.MethodDelete, url: tr.GetMcpUrl(), token: tr.GetToken(), headers: headers}); r.status != http.StatusBadRequest {
			t.Errorf("DELETE without a session id (headers %v): %d %s, want 400", headers, r.status, r.body)
		}
	}
	if r := do(t, rawReq{url: tr.GetMcpUrl(), token: tr.GetToken(), body: legacyList(2), headers: session}); r.status != http.StatusOK {
		t.Errorf("the turn's session afterwards: %d %s", r.status, r.body)
	}
}

// TestA2025RequestWithoutASessionIsABadRequest: after initialize, a
// 2025-era request without Mcp-Session-Id is answered 400 (2025-11-25
// transports: SHOULD), not mcp-go's 404 "Invalid session ID", which tells
// a client its session ended; a tools/call so refused keeps its one
// record. A forged id is still 404, as an unknown session.
func TestA2025RequestWithoutASessionIsABadRequest(t *testing.T) {
	f := newFixture(t)
	tr := f.bridge.Open(t)
	v := map[string]string{"Mcp-Protocol-Version": "2025-11-25"}
	for _, body := range []string{legacyList(2), `{"jsonrpc":"2.0","method":"notifications/initialized"}`} {
		if r := do(t, rawReq{url: tr.GetMcpUrl(), token: tr.GetToken(), body: body, headers: v}); r.status != http.StatusBadRequest {
			t.Errorf("%s without a session id: %d %s, want 400", body, r.status, r.body)
		}
	}
	before := len(f.kernel.Calls())
	call := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"files.read","arguments":{"path":"/public/a.txt"}}}`
	if r := do(t, rawReq{url: tr.GetMcpUrl(), token: tr.GetToken(), body: call, headers: v}); r.status != http.StatusBadRequest {
		t.Errorf("a tools/call without a session id: %d %s, want 400", r.status, r.body)
	}
	if calls := f.kernel.Calls()[before:]; len(calls) != 1 || calls[0].GetEdgeRejection() == "" || calls[0].GetTool() != "files.read" {
		t.Errorf("kernel saw %v, want the refused call's one record-only rejection", calls)
	}
	forged := map[string]string{"Mcp-Protocol-Version": "2025-11-25", "Mcp-Session-Id": "mcp-s1-forged.forged"}
	if r := do(t, rawReq{url: tr.GetMcpUrl(), token: tr.GetToken(), body: legacyList(4), headers: forged}); r.status != http.StatusNotFound {
		t.Errorf("a forged session id: %d %s, want 404", r.status, r.body)
	}
}

// TestA405ListsTheAllowedMethods (RFC 9110: a 405 MUST carry Allow): the
// edge's 405 for a method the endpoint never takes and the GET every era
// is refused (no standalone stream) list what the request's era takes —
// POST, and DELETE for a 2025-era session. Before, neither had an Allow
// header (mcp-go's modern GET alone did).
func TestA405ListsTheAllowedMethods(t *testing.T) {
	f := newFixture(t)
	tr := f.bridge.Open(t)
	session := legacySession(t, tr)
	modern := map[string]string{"Mcp-Protocol-Version": "2026-07-28"}
	for _, tc := range []struct {
		name    string
		method  string
		headers map[string]string
		allow   string
	}{
		{"PUT", http.MethodPut, nil, "POST, DELETE"},
		{"2026-07-28 PATCH", http.MethodPatch, modern, "POST"},
		{"2025-era GET", http.MethodGet, session, "POST, DELETE"},
		{"GET without a version", http.MethodGet, nil, "POST, DELETE"},
		{"2026-07-28 GET", http.MethodGet, modern, "POST"},
		{"2026-07-28 DELETE", http.MethodDelete, modern, "POST"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := do(t, rawReq{method: tc.method, url: tr.GetMcpUrl(), token: tr.GetToken(), headers: tc.headers})
			if r.status != http.StatusMethodNotAllowed || r.header.Get("Allow") != tc.allow {
				t.Errorf("answered %d with Allow %q (%s), want 405 with Allow %q", r.status, r.header.Get("Allow"), r.body, tc.allow)
			}
		})
	}
}
