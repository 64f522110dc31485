//go:build verify

package verify

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// TestLeaseIsolation: every way to reach a turn without its lease is
// refused before anything of the turn is touched, and records nothing.
func TestLeaseIsolation(t *testing.T) {
	s := startStack(t, stackOptions{})
	a, b := s.open("alice"), s.open("bob")
	closed := s.open("carol")
	expectOutcome(t, mustCall(t, closed, "verify.echo", `{"path":"/public/x"}`), "succeeded", "")
	s.closeTurn(closed.ID)

	// An expiring turn through sharedosctl (--ttl 5s: long enough for the
	// call below to land inside it on a loaded machine).
	out, errOut, code := s.ctl("turn", "open", "--principal", "dave", "--role", "verify", "--harness", "verify", "--ttl", "5s")
	if code != 0 {
		t.Fatalf("sharedosctl turn open --ttl 5s: exit %d: %s", code, errOut)
	}
	var exp struct{ TurnID, McpURL, Token, ExpiresAt string }
	if err := json.Unmarshal([]byte(out), &exp); err != nil {
		t.Fatalf("turn open output: %v: %s", err, out)
	}
	expiring := turn{ID: exp.TurnID, URL: exp.McpURL, Token: exp.Token}
	// Inside the TTL the turn works...
	expectOutcome(t, mustCall(t, expiring, "verify.echo", `{"path":"/public/x"}`), "succeeded", "")
	before := s.provider.handled.Load()

	call := func(id int64) string { return modernCall(id, "verify.echo", `{"path":"/public/x"}`) }
	cases := []struct {
		name   string
		req    rawReq
		status int
		turns  []string // turns that must have gained no record
	}{
		{"closed turn", rawReq{url: closed.URL, token: closed.Token, body: call(1), modern: true}, 404, []string{closed.ID}},
		{"turn A's token on turn B", rawReq{url: b.URL, token: a.Token, body: call(2), modern: true}, 404, []string{a.ID, b.ID}},
		{"turn B's token on turn A", rawReq{url: a.URL, token: b.Token, body: call(3), modern: true}, 404, []string{a.ID, b.ID}},
		{"closed turn's token on an open turn", rawReq{url: a.URL, token: closed.Token, body: call(4), modern: true}, 404, []string{a.ID, closed.ID}},
		{"no token", rawReq{url: a.URL, body: call(5), modern: true}, 401, []string{a.ID}},
		{"wrong token", rawReq{url: a.URL, token: strings.Repeat("A", 43), body: call(6), modern: true}, 401, []string{a.ID}},
		{"token with a flipped last character", rawReq{url: a.URL, token: flip(a.Token), body: call(7), modern: true}, 401, []string{a.ID}},
		{"unknown turn id", rawReq{url: strings.Replace(a.URL, a.ID, "t"+strings.Repeat("a", 26), 1), token: a.Token, body: call(9), modern: true}, 404, []string{a.ID}},
		{"traversal turn id", rawReq{url: strings.Replace(a.URL, a.ID, "..%2f"+b.ID, 1), token: b.Token, body: call(10), modern: true}, 404, []string{a.ID, b.ID}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			counts := map[string]int{}
			for _, id := range tc.turns {
				counts[id] = s.rowCount(id)
			}
			resp := do(t, tc.req)
			if resp.status != tc.status {
				t.Fatalf("HTTP %d %s, want %d", resp.status, truncate(string(resp.body), 200), tc.status)
			}
			if tc.status == 401 && resp.header.Get("WWW-Authenticate") == "" {
				t.Errorf("401 without WWW-Authenticate")
			}
			for _, id := range tc.turns {
				if n := s.rowCount(id); n != counts[id] {
					t.Errorf("turn %s gained %d records", id, n-counts[id])
				}
			}
		})
	}
	// Two Authorization headers (one valid): refused, not "first wins".
	t.Run("two Authorization headers", func(t *testing.T) {
		req, err := newRequest(context.Background(), rawReq{url: a.URL, token: a.Token, body: call(11), modern: true})
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Add("Authorization", "Bearer "+b.Token)
		n := s.rowCount(a.ID)
		resp, err := httpClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("HTTP %d, want 401", resp.StatusCode)
		}
		if s.rowCount(a.ID) != n {
			t.Errorf("a record was written")
		}
	})

	// Expiry: TTL 5 s plus a clock-skew allowance of 2 s; after that every
	// request is a 404 and nothing is recorded.
	t.Run("expired turn", func(t *testing.T) {
		expires, err := time.Parse(time.RFC3339, exp.ExpiresAt)
		if err != nil {
			t.Fatalf("expiresAt %q: %v", exp.ExpiresAt, err)
		}
		if wait := time.Until(expires.Add(2 * time.Second)); wait > 0 {
			if wait > 13*time.Second {
				t.Fatalf("expiresAt %s is more than 13s away for a 5s TTL", exp.ExpiresAt)
			}
			time.Sleep(wait)
		}
		n := s.rowCount(expiring.ID)
		resp := do(t, rawReq{url: expiring.URL, token: expiring.Token, body: call(12), modern: true})
		if resp.status != http.StatusNotFound {
			t.Errorf("expired turn: HTTP %d %s, want 404", resp.status, truncate(string(resp.body), 200))
		}
		if s.rowCount(expiring.ID) != n {
			t.Errorf("expired turn gained a record")
		}
	})
	if got := s.provider.handled.Load() - before; got != 0 {
		t.Errorf("handler ran %d times for refused requests", got)
	}
	// The refusals above touched nothing: a and b have no records at all.
	for _, id := range []string{a.ID, b.ID} {
		if n := s.rowCount(id); n != 0 {
			t.Errorf("turn %s has %d records, want 0", id, n)
		}
	}
}

func flip(tok string) string {
	last := tok[len(tok)-1]
	r := byte('A')
	if last == 'A' {
		r = 'B'
	}
	return tok[:len(tok)-1] + string(r)
}

// TestReplayIsANewAttempt: the bridge mints a fresh callId for every
// tools/call, so replaying the same HTTP request (same JSON-RPC id) is a
// second attempt: it runs again and leaves its own record — one record per
// attempt, never a merged or a missing one. Also through a legacy-session
// mcp-go client.
func TestReplayIsANewAttempt(t *testing.T) {
	s := startStack(t, stackOptions{})
	tr := s.open("alice")
	body := modernCall(777, "verify.echo", `{"path":"/public/x","value":"replay"}`)
	var callIDs []string
	for range 3 {
		resp := do(t, rawReq{url: tr.URL, token: tr.Token, body: body, modern: true})
		m, ok := resp.rpc()
		if resp.status != 200 || !ok || m.Result == nil || m.Result.IsError {
			t.Fatalf("replay: HTTP %d %s", resp.status, resp.body)
		}
		if string(m.ID) != "777" {
			t.Errorf("response id %s, want 777", m.ID)
		}
	}
	for _, h := range s.provider.snapshot() {
		callIDs = append(callIDs, h.CallID)
	}
	if len(callIDs) != 3 || callIDs[0] == callIDs[1] || callIDs[1] == callIDs[2] || callIDs[0] == callIDs[2] {
		t.Errorf("handler call ids %v, want 3 distinct", callIDs)
	}
	rows := s.ops(tr.ID)
	if len(rows) != 3 {
		t.Fatalf("%d records for 3 attempts", len(rows))
	}
	for i, r := range rows {
		if r.CallID != callIDs[i] || r.Status != "succeeded" {
			t.Errorf("record %d = %+v, want succeeded with call id %s", i, r, callIDs[i])
		}
	}

	// A legacy-era (2025-11-25, session) client through mcp-go.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tp, err := transport.NewStreamableHTTP(tr.URL, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + tr.Token}))
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tp)
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
		ProtocolVersion: "2025-11-25", ClientInfo: mcp.Implementation{Name: "verify", Version: "0"},
	}}); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	for range 2 {
		res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "verify.echo", Arguments: map[string]any{"path": "/public/x"}}})
		if err != nil || res.IsError {
			t.Fatalf("legacy call: %v %+v", err, res)
		}
	}
	if n := s.rowCount(tr.ID); n != 5 {
		t.Errorf("%d records after 5 attempts", n)
	}
}

// TestTokenMinting: 2,000 leases (bounded; 10^5 is a unit-level property)
// give 2,000 distinct tokens and turn ids; each token carries at least 256
// bits (base64url of ≥ 32 bytes) and no token is a prefix-mate of its turn id.
func TestTokenMinting(t *testing.T) {
	s := startStack(t, stackOptions{})
	const n = 2000
	tokens := make(map[string]bool, n)
	turns := make(map[string]bool, n)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	type res struct {
		tr  turn
		err error
	}
	out := make(chan res, n)
	sem := make(chan struct{}, 8)
	for range n {
		go func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			tr, err := s.openTurn(ctx, "minter", []string{"verify"}, time.Minute)
			out <- res{tr, err}
		}()
	}
	for range n {
		r := <-out
		if r.err != nil {
			t.Fatalf("open turn: %v", r.err)
		}
		if tokens[r.tr.Token] || turns[r.tr.ID] {
			t.Fatalf("collision: token or turn id repeated (%s)", r.tr.ID)
		}
		tokens[r.tr.Token], turns[r.tr.ID] = true, true
		raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(r.tr.Token, "="))
		if err != nil {
			raw, err = base64.StdEncoding.DecodeString(r.tr.Token)
		}
		if err != nil || len(raw) < 32 {
			t.Fatalf("token %d chars does not decode to ≥ 32 bytes (%v)", len(r.tr.Token), err)
		}
		if strings.Contains(r.tr.Token, r.tr.ID) || strings.Contains(r.tr.URL, r.tr.Token) {
			t.Fatalf("token and turn id/url overlap")
		}
	}
	var stored int
	if err := s.db.QueryRow(ctx, `SELECT count(*) FROM bridge.leases`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != n {
		t.Errorf("%d lease rows for %d OpenTurns", stored, n)
	}
}
