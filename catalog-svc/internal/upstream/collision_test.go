package upstream_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/sharedos/toolshare/catalog-svc/internal/catalog"
	"github.com/sharedos/toolshare/catalog-svc/internal/upstream"
	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
)

// Of two names that read alike (co.a_b, co.a-b), the one recorded already
// keeps its place: a look-alike the upstream adds later is skipped with
// the collision, even when it is listed first, and the approved tool stays
// published — acquired, or withdrawn for a while and listed again beside
// the look-alike.
func TestACollisionKeepsTheRecordedTool(t *testing.T) {
	srv := server.NewMCPServer("co", "1", server.WithToolCapabilities(true))
	ok := func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("ok"), nil
	}
	reviewed := mcp.NewTool("a_b", mcp.WithDescription("Reviewed tool."))
	lookAlike := mcp.NewTool("a-b", mcp.WithDescription("Look-alike added later.")) // listed first: '-' sorts before '_'
	srv.AddTool(reviewed, ok)
	hs := httptest.NewServer(server.NewStreamableHTTPServer(srv))
	t.Cleanup(hs.Close)
	h := newHarness(t, upstream.Guard{})
	rec, err := h.m.Add(t.Context(), &sharedosv1.UpstreamProvider{Namespace: "co", Url: hs.URL + "/mcp"}, "op")
	if err != nil {
		t.Fatal(err)
	}
	approved := toolOf(t, rec, "co.a_b").GetPendingDigest()
	if _, err := h.m.Approve(t.Context(), "co.a_b", approved, "op"); err != nil {
		t.Fatal(err)
	}
	refresh := func() *sharedosv1.GetProviderResponse {
		t.Helper()
		rec, err := h.m.Refresh(t.Context(), "co", "op")
		if err != nil || rec.GetStatus().GetError() != "" {
			t.Fatalf("refresh: %v %s", err, rec.GetStatus().GetError())
		}
		return rec
	}
	kept := func(rec *sharedosv1.GetProviderResponse) {
		t.Helper()
		if u := toolOf(t, rec, "co.a_b"); u.GetState() != sharedosv1.UpstreamToolState_UPSTREAM_TOOL_STATE_PUBLISHED || u.GetDigest() != approved {
			t.Errorf("the approved tool: %v", u)
		}
		if _, pub, err := h.cat.Get(t.Context(), "co.a_b"); err != nil || pub.GetDigest() != approved {
			t.Errorf("the approved tool in the catalogue: %v, %v", pub, err)
		}
		if res, err := h.call("co", "co.a_b", `{}`); err != nil || !strings.Contains(string(res.GetContentJson()), "ok") {
			t.Errorf("call of the approved tool: %v, %v", res, err)
		}
		for _, u := range rec.GetStatus().GetTools() {
			if u.GetName() == "co.a-b" {
				t.Errorf("the look-alike was acquired: %v", u)
			}
		}
		if _, _, err := h.cat.Get(t.Context(), "co.a-b"); !errors.Is(err, catalog.ErrNotFound) {
			t.Errorf("the look-alike in the catalogue: %v", err)
		}
		skipped := rec.GetStatus().GetSkipped()
		if len(skipped) != 1 || skipped[0].GetUpstreamName() != "a-b" || !strings.Contains(skipped[0].GetReason(), "co.a-b collides with co.a_b") {
			t.Errorf("skipped %v, want a-b for its collision with co.a_b", skipped)
		}
	}

	srv.AddTool(lookAlike, ok)
	kept(refresh())
	kept(refresh()) // and on the next refresh

	// Withdrawn while the upstream lists it not, then listed again beside
	// the look-alike: it is judged against its record and kept.
	srv.DeleteTools("a_b", "a-b")
	rec = refresh()
	if len(rec.GetStatus().GetTools()) != 0 || len(rec.GetStatus().GetWithdrawnTools()) != 1 {
		t.Fatalf("nothing listed: tools %v, withdrawn %v", rec.GetStatus().GetTools(), rec.GetStatus().GetWithdrawnTools())
	}
	srv.AddTools(server.ServerTool{Tool: lookAlike, Handler: ok}, server.ServerTool{Tool: reviewed, Handler: ok})
	kept(refresh())
}
