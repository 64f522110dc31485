package app_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sharedos/toolshare/bridge-svc/internal/bridgetest"
	"github.com/sharedos/toolshare/bridge-svc/internal/leases"
	"github.com/sharedos/toolshare/bridge-svc/migrations"
	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/platform/pgdb/pgtest"
)

// TestTwoPodsOnePostgres: two bridge instances on one database. A turn
// opened on the first is served by the second (both eras, a legacy session
// minted on one pod used on the other); CloseTurn on the second is seen by
// both on their very next request, and after it nothing reaches the kernel.
func TestTwoPodsOnePostgres(t *testing.T) {
	dsn := pgtest.NewDatabase(t, migrations.Up)
	catalog, kernel := &bridgetest.FakeCatalog{}, bridgetest.NewFakeKernel()
	catalog.SetTools(bridgetest.DefaultTools())
	addr := bridgetest.ServeFakes(t, catalog, kernel)
	pod1 := bridgetest.Start(t, addr, dsn)
	pod2 := bridgetest.Start(t, addr, dsn)

	lease := pod1.Open(t)
	on := func(pod *bridgetest.Bridge) string {
		return strings.Replace(lease.GetMcpUrl(), pod1.URL, pod.URL, 1)
	}

	// Modern: each request stands alone; pod2 serves it from the lease row.
	for _, pod := range []*bridgetest.Bridge{pod1, pod2} {
		resp := do(t, rawReq{url: on(pod), token: lease.GetToken(), body: modernCall(1, "files.read", `{"path":"/public/a.txt"}`), modern: true})
		if resp.status != 200 || !strings.Contains(string(resp.body), "contents of /public/a.txt") {
			t.Fatalf("modern call on %s: %d %s", pod.URL, resp.status, resp.body)
		}
	}
	// Legacy: a session minted by pod1 is valid on pod2.
	init := do(t, rawReq{url: on(pod1), token: lease.GetToken(), body: legacyInit})
	sid := init.header.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatalf("no session id: %d %s", init.status, init.body)
	}
	list := do(t, rawReq{url: on(pod2), token: lease.GetToken(), body: legacyList(2), headers: map[string]string{"Mcp-Session-Id": sid}})
	if list.status != 200 || !strings.Contains(string(list.body), "files.read") {
		t.Fatalf("legacy list on pod2 with pod1's session: %d %s", list.status, list.body)
	}
	// A real client connected to pod2 works too.
	c := connectGoSDK(t, on(pod2), lease.GetToken(), eras[1], nil)
	if res, err := c.Call(context.Background(), "files.read", map[string]any{"path": "/private/x"}); err != nil || !res.IsError {
		t.Fatalf("denied call on pod2 = %+v, %v", res, err)
	}
	c.Close()

	before := len(kernel.Calls())
	if _, err := pod2.Client.CloseTurn(context.Background(), &sharedosv1.CloseTurnRequest{TurnId: lease.GetTurnId()}); err != nil {
		t.Fatal(err)
	}
	for _, pod := range []*bridgetest.Bridge{pod1, pod2} {
		for _, q := range []rawReq{
			{url: on(pod), token: lease.GetToken(), body: modernCall(5, "files.read", `{"path":"/public/a.txt"}`), modern: true},
			{url: on(pod), token: lease.GetToken(), body: `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"files.read","arguments":{"path":"/public/a.txt"}}}`,
				headers: map[string]string{"Mcp-Session-Id": sid}},
			{url: on(pod), token: lease.GetToken(), body: modernList(7), modern: true},
		} {
			if resp := do(t, q); resp.status != http.StatusNotFound {
				t.Errorf("after close on %s: %d %s, want 404", pod.URL, resp.status, resp.body)
			}
		}
		got, err := pod.Client.GetTurn(context.Background(), &sharedosv1.GetTurnRequest{TurnId: lease.GetTurnId()})
		if err != nil || got.GetState() != sharedosv1.TurnState_TURN_STATE_CLOSED {
			t.Errorf("GetTurn on %s = %v, %v", pod.URL, got, err)
		}
	}
	if after := len(kernel.Calls()); after != before {
		t.Errorf("closed door: %d InvokeTool calls after close, want 0", after-before)
	}
	// The pods' cached servers for the turn go with the sweep (pod2 evicted
	// at close already; pod1 on its next sweep or request).
	for _, pod := range []*bridgetest.Bridge{pod1, pod2} {
		for _, id := range pod.App.CachedTurns() {
			if id == lease.GetTurnId() {
				t.Errorf("%s still caches the closed turn's server", pod.URL)
			}
		}
	}
}

// twoPodsAsking is two bridge pods on one database, over a kernel whose
// files.read asks for input first, and a turn opened on the first with a
// 2025-era session that declared elicitation.
func twoPodsAsking(t *testing.T) (pod1, pod2 *bridgetest.Bridge, kernel *bridgetest.FakeKernel, lease *sharedosv1.TurnLease, session map[string]string) {
	t.Helper()
	dsn := pgtest.NewDatabase(t, migrations.Up)
	catalog := &bridgetest.FakeCatalog{}
	kernel = bridgetest.NewFakeKernel()
	catalog.SetTools(bridgetest.DefaultTools())
	kernel.Dispatch = askingDispatch
	addr := bridgetest.ServeFakes(t, catalog, kernel)
	pod1 = bridgetest.Start(t, addr, dsn)
	pod2 = bridgetest.Start(t, addr, dsn)
	lease = pod1.Open(t)
	return pod1, pod2, kernel, lease, initWith(t, lease, `{"elicitation":{}}`)
}

// TestInputAnswerReachesAnotherPod (ADR 0017): a 2025-era client's answer
// to an input request may reach another pod than the one whose call asked;
// that pod passes it on through PostgreSQL and the call goes on, its
// result on the asking pod's stream.
func TestInputAnswerReachesAnotherPod(t *testing.T) {
	pod1, pod2, _, lease, session := twoPodsAsking(t)

	stream, stop := events(t, lease, session, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"files.read","arguments":{"path":"/public/a.txt"}}}`)
	defer stop()
	asked := next(t, stream)
	if string(asked["method"]) != `"elicitation/create"` {
		t.Fatalf("asked %v", asked)
	}
	resp := do(t, rawReq{url: strings.Replace(lease.GetMcpUrl(), pod1.URL, pod2.URL, 1), token: lease.GetToken(), headers: session,
		body: `{"jsonrpc":"2.0","id":` + string(asked["id"]) + `,"result":{"action":"accept","content":{"ok":false}}}`})
	if resp.status != http.StatusAccepted {
		t.Fatalf("the answer on pod2: %d %s", resp.status, resp.body)
	}
	final := next(t, stream)
	if string(final["id"]) != "3" || !strings.Contains(string(final["result"]), `\"ok\":false`) {
		t.Fatalf("final on pod1: %v", final)
	}
}

// TestDeletingASessionOnAnotherPodEndsItsAskedRounds: a 2025-era client
// whose call waits on one pod for its answer, and which ends its session
// with DELETE through another pod, ends that attempt cancelled too — the
// asking pod reads the termination with the lease status — instead of
// holding it until the round expires.
func TestDeletingASessionOnAnotherPodEndsItsAskedRounds(t *testing.T) {
	pod1, pod2, kernel, lease, session := twoPodsAsking(t)
	before := len(kernel.Calls())

	stream, stop := events(t, lease, session, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"files.read","arguments":{"path":"/public/a.txt"}}}`)
	defer stop()
	if asked := next(t, stream); string(asked["method"]) != `"elicitation/create"` {
		t.Fatalf("asked %v", asked)
	}
	if r := do(t, rawReq{method: http.MethodDelete, url: strings.Replace(lease.GetMcpUrl(), pod1.URL, pod2.URL, 1), token: lease.GetToken(),
		headers: session}); r.status != http.StatusOK {
		t.Fatalf("DELETE on pod2: %d %s", r.status, r.body)
	}
	select {
	case m, ok := <-stream:
		if ok {
			t.Fatalf("the call's stream on pod1 carried %v after the DELETE, want it ended without a result", m)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the call's stream on pod1 did not end after the DELETE on pod2")
	}
	calls := kernel.Calls()[before:]
	if len(calls) != 2 || !calls[1].GetAbandoned() || calls[1].GetAbandonedCode() != "" || calls[1].GetResume().GetAttemptId() != "attempt-1" {
		t.Fatalf("the kernel saw %v: want the call and its round's resumption abandoned by its client (cancelled)", calls)
	}
}

// TestInputAnswersPerTurnBudget: answers to input requests nobody is
// waiting for are passed on (202) up to leases.MaxPassedAnswers per turn;
// past that the client is told to slow down (429) and nothing is stored.
func TestInputAnswersPerTurnBudget(t *testing.T) {
	dsn := pgtest.NewDatabase(t, migrations.Up)
	catalog, kernel := &bridgetest.FakeCatalog{}, bridgetest.NewFakeKernel()
	catalog.SetTools(bridgetest.DefaultTools())
	pod := bridgetest.Start(t, bridgetest.ServeFakes(t, catalog, kernel), dsn)
	lease := pod.Open(t)
	session := initWith(t, lease, `{"elicitation":{}}`)
	answer := func(i int) rawResp {
		return do(t, rawReq{url: lease.GetMcpUrl(), token: lease.GetToken(), headers: session,
			body: fmt.Sprintf(`{"jsonrpc":"2.0","id":"sharedos-ask-%032x","result":{"action":"accept"}}`, i)}) // minted ids' shape, asked by nobody
	}
	for i := range leases.MaxPassedAnswers {
		if r := answer(i); r.status != http.StatusAccepted {
			t.Fatalf("answer %d: %d %s", i, r.status, r.body)
		}
	}
	if r := answer(leases.MaxPassedAnswers); r.status != http.StatusTooManyRequests {
		t.Fatalf("answer past the budget: %d %s, want 429", r.status, r.body)
	}
}
