//go:build verify

package verify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// fuzzStack is one stack per fuzzing process (each worker starts its own).
func fuzzStack(f *testing.F) (*stack, turn) {
	s := startStack(f, stackOptions{})
	return s, s.open("fuzzer")
}

// with returns a copy of s whose helpers report to t (the fuzz function
// must not use the *testing.F).
func (s *stack) with(t testing.TB) *stack {
	c := *s
	c.t = t
	return &c
}

// FuzzMCPEdge posts arbitrary bodies at a live turn endpoint (with the
// 2026-era headers derived from the body when it parses): never a 5xx,
// always an answer within 10 s, and a handler never runs for an attempt
// that has no record.
func FuzzMCPEdge(f *testing.F) {
	s, tr := fuzzStack(f)
	for _, tc := range hostileCases(tr) {
		if len(tc.req.body) < 64<<10 && tc.req.method == "" {
			f.Add([]byte(tc.req.body))
		}
	}
	f.Add([]byte(modernCall(1, "verify.echo", `{"path":"/public/x"}`)))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + modernMeta + `}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"f","version":"1"}}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		s := s.with(t)
		before := len(s.provider.snapshot())
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp := send(ctx, rawReq{url: tr.URL, token: tr.Token, body: string(body), modern: true})
		if resp.err != nil {
			t.Fatalf("no answer within 10s: %v", resp.err)
		}
		if resp.status >= 500 {
			t.Fatalf("HTTP %d %s", resp.status, truncate(string(resp.body), 300))
		}
		if len(s.provider.snapshot()) > before {
			checkHandledMatchRecords(t, s, tr.ID)
		}
	})
}

// FuzzToolCall sends well-formed 2026-era tools/calls with arbitrary tool
// names and argument bytes: never a 5xx; every answer — a result or a
// protocol error — has exactly one record; for a result its requested-name
// digest is the SHA-256 of the name sent, and anything dispatched is what
// was recorded.
func FuzzToolCall(f *testing.F) {
	s, tr := fuzzStack(f)
	for _, seed := range []struct{ name, args string }{
		{"verify.echo", `{"path":"/public/x"}`},
		{"verify.echo", `{"path":"/private/a.txt"}`},
		{"files.read", `{"path":"/public/../private/a.txt"}`},
		{"Verify.Echo", `{}`},
		{"verify.echo\x00", `{"path":"/public/x"}`},
		{"vérify.echo", `{"path":"/public/x"}`},
		{strings.Repeat("a", 300), `{}`},
		{"verify.echo", `{"path":"/public/x","value":"\u0000"}`},
		{"verify.echo", `[1,2]`},
		{"verify.echo", `{"path":1e400}`},
	} {
		f.Add(seed.name, []byte(seed.args))
	}
	f.Fuzz(func(t *testing.T, name string, args []byte) {
		s := s.with(t)
		nameJSON, _ := json.Marshal(name)
		var sent string
		_ = json.Unmarshal(nameJSON, &sent) // what the server decodes (invalid UTF-8 → U+FFFD)
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":` + string(nameJSON) +
			`,"arguments":` + string(args) + `,` + modernMeta + `}}`
		hdr := map[string]string{"Mcp-Name": b64Name(sent)}
		before, handled := s.rowCount(tr.ID), len(s.provider.snapshot())
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp := send(ctx, rawReq{url: tr.URL, token: tr.Token, body: body, modern: true, headers: hdr})
		if resp.err != nil {
			t.Fatalf("no answer within 10s: %v", resp.err)
		}
		if resp.status >= 500 {
			t.Fatalf("HTTP %d %s", resp.status, truncate(string(resp.body), 300))
		}
		msg, ok := resp.rpc()
		s.waitSettled(tr.ID, 10*time.Second)
		if n := s.rowCount(tr.ID) - before; n != 1 {
			t.Fatalf("an answer (%d %s) and %d new records, want 1", resp.status, truncate(string(resp.body), 200), n)
		}
		if !ok || msg.Result == nil {
			// A protocol error is an attempt too (issue 17 item 7): recorded,
			// never run.
			if n := len(s.provider.snapshot()); n != handled {
				t.Fatalf("a protocol error (%s) but the handler ran", truncate(string(resp.body), 200))
			}
			return
		}
		sum := sha256.Sum256([]byte(sent))
		var recorded string
		if err := s.db.QueryRow(ctx, `SELECT requested_tool_sha256 FROM catalog.operations WHERE turn_id = $1 ORDER BY sequence DESC LIMIT 1`, tr.ID).Scan(&recorded); err != nil {
			t.Fatal(err)
		}
		if d := hex.EncodeToString(sum[:]); recorded != d && recorded != "sha256:"+d {
			t.Fatalf("recorded name digest %s, sent name digest %s", recorded, d)
		}
		if len(s.provider.snapshot()) > handled {
			checkHandledMatchRecords(t, s, tr.ID)
		}
	})
}
