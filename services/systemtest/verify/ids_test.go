//go:build verify

package verify

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// legacySession initializes a session of a 2025 era (version) on tr and
// returns its id.
func legacySession(ctx context.Context, t *testing.T, tr turn, version string) string {
	t.Helper()
	init := send(ctx, rawReq{url: tr.URL, token: tr.Token, body: `{"jsonrpc":"2.0","id":1,"method":"initialize","params":` +
		`{"protocolVersion":"` + version + `","capabilities":{},"clientInfo":{"name":"verify","version":"0"}}}`})
	sid := init.header.Get("Mcp-Session-Id")
	if init.err != nil || init.status != 200 || sid == "" {
		t.Fatalf("initialize: %d %v %s", init.status, init.err, init.body)
	}
	h := map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": version}
	if r := send(ctx, rawReq{url: tr.URL, token: tr.Token, headers: h,
		body: `{"jsonrpc":"2.0","method":"notifications/initialized"}`}); r.err != nil || r.status >= 300 {
		t.Fatalf("initialized: %d %v", r.status, r.err)
	}
	return sid
}

// TestSameRequestIDsAcrossTurns (issue 17, item 20; a 2026 SDK advisory
// misrouted responses when concurrent clients reused request ids): 50 turns
// × 20 concurrent calls, every one with JSON-RPC id 1, in both eras. Each
// answer reaches its own caller with its own content, and each turn has
// exactly its own 20 records.
func TestSameRequestIDsAcrossTurns(t *testing.T) {
	s := startStack(t, stackOptions{})
	const turns, calls = 50, 20
	for _, era := range []string{"2026-07-28", "2025-11-25"} {
		t.Run(era, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			trs := make([]turn, turns)
			sids := make([]string, turns)
			for i := range trs {
				trs[i] = s.open(fmt.Sprintf("ids-%s-%d", era, i))
				if era != "2026-07-28" {
					sids[i] = legacySession(ctx, t, trs[i], era)
				}
			}
			var wg sync.WaitGroup
			var mu sync.Mutex
			var bad []string
			for i, tr := range trs {
				for j := range calls {
					wg.Go(func() {
						mark := fmt.Sprintf("t%d-c%d", i, j)
						args := `{"path":"/public/x","value":"echo:` + mark + `"}`
						r := rawReq{url: tr.URL, token: tr.Token, body: modernCall(1, "verify.echo", args), modern: true}
						if era != "2026-07-28" {
							r = rawReq{url: tr.URL, token: tr.Token, headers: map[string]string{"Mcp-Session-Id": sids[i], "Mcp-Protocol-Version": era},
								body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"verify.echo","arguments":` + args + `}}`}
						}
						resp := send(ctx, r)
						msg, ok := resp.rpc()
						if !ok || msg.Result == nil || msg.Result.IsError || string(msg.ID) != "1" ||
							len(msg.Result.Content) != 1 || msg.Result.Content[0].Text != "echo "+mark {
							mu.Lock()
							bad = append(bad, fmt.Sprintf("%s: %d %s", mark, resp.status, truncate(string(resp.body), 200)))
							mu.Unlock()
						}
					})
				}
			}
			wg.Wait()
			if len(bad) > 0 {
				t.Fatalf("%d of %d answers did not reach their own caller, e.g. %s", len(bad), turns*calls, strings.Join(bad[:min(3, len(bad))], "; "))
			}
			for _, tr := range trs {
				if n := s.rowCount(tr.ID); n != calls {
					t.Errorf("turn %s: %d records for %d calls", tr.ID, n, calls)
				}
			}
		})
	}
}

// TestSameDecisionInEveryEra (issue 17, item 19; a 2026 MCP-server advisory
// skipped per-tool checks for clients of an older protocol version): the
// same four calls — allowed, denied by policy, an unknown tool, a handler
// failure — under 2026-07-28, 2025-11-25 and 2025-06-18 get the same
// answer text and the same records (status, code, reason, tool).
func TestSameDecisionInEveryEra(t *testing.T) {
	s := startStack(t, stackOptions{})
	calls := []struct{ name, args string }{
		{"verify.echo", `{"path":"/public/x"}`},
		{"verify.echo", `{"path":"/private/a.txt"}`},
		{"nope.tool", `{}`},
		{"verify.echo", `{"path":"/public/x","value":"fail"}`},
	}
	type seen struct{ texts, records []string }
	got := map[string]seen{}
	eras := []string{"2026-07-28", "2025-11-25", "2025-06-18"}
	for _, era := range eras {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		tr := s.open("era-" + era)
		var sid string
		if era != "2026-07-28" {
			sid = legacySession(ctx, t, tr, era)
		}
		var sn seen
		for i, c := range calls {
			r := rawReq{url: tr.URL, token: tr.Token, body: modernCall(int64(i+1), c.name, c.args), modern: true}
			if sid != "" {
				r = rawReq{url: tr.URL, token: tr.Token, headers: map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": era},
					body: fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%s,"arguments":%s}}`, i+1, quote(c.name), c.args)}
			}
			resp := send(ctx, r)
			msg, ok := resp.rpc()
			if !ok || msg.Result == nil {
				t.Fatalf("%s %s %s: %d %s", era, c.name, c.args, resp.status, truncate(string(resp.body), 300))
			}
			sn.texts = append(sn.texts, fmt.Sprintf("isError=%v %s", msg.Result.IsError, msg.text()))
		}
		for _, row := range s.ops(tr.ID) {
			sn.records = append(sn.records, strings.Join([]string{row.Tool, row.Status, row.Code, row.Reason}, " | "))
		}
		got[era] = sn
		cancel()
	}
	want := got[eras[0]]
	if len(want.records) != len(calls) {
		t.Fatalf("%s: %d records for %d calls", eras[0], len(want.records), len(calls))
	}
	for i, prefix := range []string{"isError=false handled verify.echo", "isError=true denied: ", "isError=true denied: ", "isError=true failed: "} {
		if !strings.HasPrefix(want.texts[i], prefix) {
			t.Fatalf("%s call %d answered %q, want %q…", eras[0], i, want.texts[i], prefix)
		}
	}
	for _, era := range eras[1:] {
		if strings.Join(got[era].texts, "\n") != strings.Join(want.texts, "\n") {
			t.Errorf("answers under %s differ from %s:\n%s\nvs\n%s", era, eras[0], strings.Join(got[era].texts, "\n"), strings.Join(want.texts, "\n"))
		}
		if strings.Join(got[era].records, "\n") != strings.Join(want.records, "\n") {
			t.Errorf("records under %s differ from %s:\n%s\nvs\n%s", era, eras[0], strings.Join(got[era].records, "\n"), strings.Join(want.records, "\n"))
		}
	}
}
