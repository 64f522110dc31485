//go:build verify

package verify

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// roundCall is a 2026-07-28 tools/call of verify.ask declaring caps, with
// extra params members spliced in.
func roundCall(path, caps, extra string) string {
	meta := strings.Replace(modernMeta, `"io.modelcontextprotocol/clientCapabilities":{}`,
		`"io.modelcontextprotocol/clientCapabilities":`+caps, 1)
	return `{"jsonrpc":"2.0","id":` + itoa(rpcID.Add(1)) + `,"method":"tools/call","params":{"name":"verify.ask","arguments":{"path":` +
		quote(path) + `},` + extra + meta + `}}`
}

func itoa(i int64) string { b, _ := json.Marshal(i); return string(b) }

// TestInputRoundsOnTheRealStack (issue 18 item 3, ADR 0017): the real
// processes on PostgreSQL with two bridges. A tool's input round is
// answered on one bridge and continued on the other (one state key, one
// attempt, one record with its round); the state replayed is refused on a
// record of its own, altered it is -32602, an undeclared capability -32021,
// a path the policy denies never asks; a round left open when the turn
// closes ends cancelled. Every attempt has exactly one record, none left
// pending.
func TestInputRoundsOnTheRealStack(t *testing.T) {
	s := startStack(t, stackOptions{bridges: 2})
	tr := s.open("alice")
	on := func(i int) string { return strings.Replace(tr.URL, s.BridgeHTTP[0], s.BridgeHTTP[i], 1) }
	post := func(i int, body string) (rawResp, rpc) {
		t.Helper()
		r := do(t, rawReq{url: on(i), token: tr.Token, body: body, modern: true})
		m, _ := r.rpc()
		return r, m
	}
	var first struct {
		Result struct {
			ResultType    string                     `json:"resultType"`
			InputRequests map[string]json.RawMessage `json:"inputRequests"`
			RequestState  string                     `json:"requestState"`
		} `json:"result"`
	}
	r, _ := post(0, roundCall("/public/a.txt", `{"elicitation":{}}`, ""))
	if r.status != http.StatusOK || json.Unmarshal(r.body, &first) != nil || first.Result.ResultType != "input_required" ||
		first.Result.InputRequests["confirm"] == nil || first.Result.RequestState == "" {
		t.Fatalf("round 1 on bridge 0: %d %s", r.status, r.body)
	}
	retry := `"inputResponses":{"confirm":{"action":"accept","content":{"ok":true}}},"requestState":` + quote(first.Result.RequestState) + `,`
	r, m := post(1, roundCall("/public/a.txt", `{"elicitation":{}}`, retry))
	if r.status != http.StatusOK || m.Result == nil || m.Result.IsError || !strings.Contains(m.text(), "confirmed verify-round-") {
		t.Fatalf("the retry on bridge 1: %d %s", r.status, r.body)
	}
	if r, m = post(0, roundCall("/public/a.txt", `{"elicitation":{}}`, retry)); m.Result == nil || !m.Result.IsError ||
		!strings.HasPrefix(m.text(), "failed: the input round this call answers is not open") {
		t.Fatalf("the state replayed: %d %s", r.status, r.body)
	}
	tampered := strings.Replace(retry, first.Result.RequestState, first.Result.RequestState+"x", 1)
	if r, m = post(1, roundCall("/public/a.txt", `{"elicitation":{}}`, tampered)); r.status != http.StatusBadRequest || m.Error == nil || m.Error.Code != -32602 {
		t.Fatalf("the state altered: %d %s", r.status, r.body)
	}
	if r, m = post(0, roundCall("/public/a.txt", `{}`, "")); r.status != http.StatusBadRequest || m.Error == nil || m.Error.Code != -32021 {
		t.Fatalf("undeclared elicitation: %d %s", r.status, r.body)
	}
	if r, m = post(0, roundCall("/private/a.txt", `{"elicitation":{}}`, "")); m.Result == nil || !strings.HasPrefix(m.text(), "denied: ") {
		t.Fatalf("a denied path: %d %s", r.status, r.body)
	}
	if r, _ = post(1, roundCall("/public/b.txt", `{"elicitation":{}}`, "")); r.status != http.StatusOK || !strings.Contains(string(r.body), "input_required") {
		t.Fatalf("a round left open: %d %s", r.status, r.body)
	}
	s.closeTurn(tr.ID)
	s.waitSettled(tr.ID, 30*time.Second)

	type row struct{ status, code string }
	want := []row{
		{"succeeded", ""}, {"failed", "invalid_request"}, {"failed", "invalid_request"},
		{"failed", "missing_capability"}, {"denied", "permission_denied"}, {"cancelled", "cancelled"},
	}
	rows := s.ops(tr.ID)
	if len(rows) != len(want) {
		t.Fatalf("%d records for %d attempts: %+v", len(rows), len(want), rows)
	}
	for i, w := range want {
		if rows[i].Status != w.status || rows[i].Code != w.code {
			t.Errorf("record %d: %s/%s (%s), want %s/%s", i, rows[i].Status, rows[i].Code, rows[i].Reason, w.status, w.code)
		}
	}
	if rows[0].InputRounds != 1 || rows[5].InputRounds != 1 || rows[3].InputRounds != 0 {
		t.Errorf("input rounds %d, %d, %d: want 1 for the answered and the abandoned attempt", rows[0].InputRounds, rows[5].InputRounds, rows[3].InputRounds)
	}
	checkHandledMatchRecords(t, s, tr.ID)
}
