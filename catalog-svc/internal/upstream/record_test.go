package upstream_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"google.golang.org/protobuf/proto"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/platform/grpcx"

	"github.com/sharedos/toolshare/catalog-svc/internal/store/memory"
	"github.com/sharedos/toolshare/catalog-svc/internal/upstream"
)

// served is s over Streamable HTTP: its MCP endpoint.
func served(t *testing.T, s *server.MCPServer) string {
	t.Helper()
	hs := httptest.NewServer(server.NewStreamableHTTPServer(s))
	t.Cleanup(hs.Close)
	return hs.URL + "/mcp"
}

// newManager is a manager over a fresh store and catalogue.
func newManager(t *testing.T) *upstream.Manager {
	t.Helper()
	return managerOver(t, memory.New(), nil)
}

func answered(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return mcp.NewToolResultText("ok"), nil
}

// bounded fails t unless rec, and every provider of m as providers get and
// providers list answer with them, are within the record's bound.
func bounded(t *testing.T, m *upstream.Manager, rec *sharedosv1.GetProviderResponse) {
	t.Helper()
	if n := proto.Size(rec); n > upstream.MaxRecordBytes {
		t.Errorf("the provider's record is %d bytes, more than %d", n, upstream.MaxRecordBytes)
	}
	got, err := m.Get(t.Context(), rec.GetProvider().GetNamespace())
	if err != nil {
		t.Fatal(err)
	}
	if n := proto.Size(got); n > upstream.MaxRecordBytes {
		t.Errorf("providers get: %d bytes, more than %d", n, upstream.MaxRecordBytes)
	}
	events, long := 0, 0
	for _, e := range got.GetStatus().GetEvents() {
		events += proto.Size(e) + 4
		if len(e.GetDiff()) > upstream.MaxEventDiffBytes {
			long++
		}
	}
	if events > upstream.MaxEventsBytes || long > 0 {
		t.Errorf("the events are %d bytes, %d of them with a diff of more than %d", events, long, upstream.MaxEventDiffBytes)
	}
	recs, err := m.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if n := proto.Size(&sharedosv1.ListProvidersResponse{Providers: recs}); n > grpcx.MaxMessageSize {
		t.Errorf("providers list: %d bytes, more than one message holds (%d)", n, grpcx.MaxMessageSize)
	}
}

// deepSchema is a schema whose default is an array of n numbers, v in its
// middle, nested levels objects deep: indented one member per line, as a
// diff shows it, it is 33 times its size.
func deepSchema(levels, n, v int) json.RawMessage {
	arr := make([]int, n)
	arr[n/2] = v
	var s any = map[string]any{"type": "array", "default": arr}
	for range levels {
		s = map[string]any{"type": "object", "properties": map[string]any{"p": s}}
	}
	b, _ := json.Marshal(s)
	return b
}

// bigTool is a tool of about 480 KB — its input and output schemas each
// within the catalogue's 256 KiB — that v changes.
func bigTool(name string, v int) server.ServerTool {
	tool := mcp.NewToolWithRawSchema(name, "A test tool.", deepSchema(14, 120000, v))
	tool.RawOutputSchema = deepSchema(14, 120000, v)
	return server.ServerTool{Tool: tool, Handler: answered}
}

// Twelve tools of 480 KB each: each quarantine event kept the whole
// indented diff, 16 MB a tool, and the record of 196 MB failed providers
// add, get and list and tools get. Now an event keeps 64 KiB of its diff,
// saying where the rest is, and the record holds the definitions that fit
// within its bound: the others are skipped, saying why. tools diff still
// shows the whole diff, and the record stays bounded once a published
// definition and a changed one are both kept.
func TestBigDefinitionsKeepTheRecordBounded(t *testing.T) {
	s := server.NewMCPServer("big", "1", server.WithToolCapabilities(false))
	var ts []server.ServerTool
	for i := range 12 {
		ts = append(ts, bigTool(fmt.Sprintf("t%02d", i), 0))
	}
	s.SetTools(ts...)
	m := newManager(t)
	rec, err := m.Add(t.Context(), &sharedosv1.UpstreamProvider{Namespace: "big", Url: served(t, s)}, "op")
	if err != nil || rec.GetStatus().GetError() != "" {
		t.Fatalf("add: %v %s", err, rec.GetStatus().GetError())
	}
	bounded(t, m, rec)
	st := rec.GetStatus()
	if n := len(st.GetTools()); n < 5 || n+len(st.GetSkipped()) != 12 {
		t.Fatalf("%d tools acquired and %d skipped, want at least 5 of 12 acquired and the rest skipped", n, len(st.GetSkipped()))
	}
	for _, sk := range st.GetSkipped() {
		if !strings.Contains(sk.GetReason(), "does not fit in the provider's record") {
			t.Errorf("%s skipped: %s", sk.GetUpstreamName(), sk.GetReason())
		}
	}
	for _, e := range st.GetEvents() {
		if want := "shows the whole diff"; e.GetAction() != "quarantined" || !strings.HasPrefix(e.GetDiff(), "--- published\n+++ pending\n") ||
			!strings.Contains(e.GetDiff(), "…[cut: ") || !strings.Contains(e.GetDiff(), "sharedosctl tools diff "+e.GetTool()+" "+want) {
			t.Errorf("%s %s event: diff %.200q … %q", e.GetTool(), e.GetAction(), e.GetDiff(), e.GetDiff()[max(0, len(e.GetDiff())-200):])
		}
	}
	_, d, err := m.Diff(t.Context(), "big.t00")
	if err != nil || strings.Contains(d, "…[cut: ") || len(d) < 10<<20 || len(d) > upstream.MaxDiffBytes {
		t.Errorf("tools diff: %v, %d bytes", err, len(d))
	}

	// Approved, then changed, and listed alone: the record keeps both of
	// its definitions, in the room the others held.
	t00 := acquired(t, rec, "big.t00")
	if _, err := m.Approve(t.Context(), "big.t00", t00.GetPendingDigest(), "op"); err != nil {
		t.Fatal(err)
	}
	s.SetTools(bigTool("t00", 1))
	if rec, err = m.Refresh(t.Context(), "big", "op"); err != nil || rec.GetStatus().GetError() != "" {
		t.Fatalf("refresh: %v %s", err, rec.GetStatus().GetError())
	}
	bounded(t, m, rec)
	if t00 := acquired(t, rec, "big.t00"); t00.GetState() != sharedosv1.UpstreamToolState_UPSTREAM_TOOL_STATE_QUARANTINED || t00.GetPublished() == nil || t00.GetPending() == nil {
		t.Errorf("big.t00 is %s (%s), want it quarantined with both definitions", t00.GetState(), t00.GetReason())
	}
	if _, d, err := m.Diff(t.Context(), "big.t00"); err != nil || strings.Count(d, "\n-") != 2 || len(d) > 4096 {
		t.Errorf("tools diff of the changed tool: %v, %.2000q", err, d)
	}
}

// acquired is rec's tool name; t fails, naming the tools there are, when
// there is none.
func acquired(t *testing.T, rec *sharedosv1.GetProviderResponse, name string) *sharedosv1.UpstreamTool {
	t.Helper()
	var names []string
	for _, u := range rec.GetStatus().GetTools() {
		if u.GetName() == name {
			return u
		}
		names = append(names, u.GetName())
	}
	t.Fatalf("no tool %s, only %v", name, names)
	return nil
}

// An upstream that renames its tools at every listing grows its record by
// bytes as well as by events: without auto-approval each new name is a
// quarantine event with a diff, which fitEvents keeps within its bytes;
// with it each name it withdraws is remembered with its approved
// definition, which makes room when none is left — its digest still
// judges the tool when it is listed again.
func TestRenamedToolsKeepTheRecordBounded(t *testing.T) {
	for _, auto := range []bool{false, true} {
		t.Run(fmt.Sprintf("auto-approve-new %v", auto), func(t *testing.T) {
			n := 20000 // 40 KB a tool: its diff of 1 MB
			if auto {
				n = 60000 // 120 KB a tool: 40 of them remembered
			}
			tool := func(name string, v int) server.ServerTool {
				return server.ServerTool{Tool: mcp.NewToolWithRawSchema(name, "A test tool.", deepSchema(10, n, v)), Handler: answered}
			}
			s := server.NewMCPServer("renaming", "1", server.WithToolCapabilities(false))
			s.SetTools(tool("r0a", 0), tool("r0b", 0))
			m := newManager(t)
			rec, err := m.Add(t.Context(), &sharedosv1.UpstreamProvider{Namespace: "ren", Url: served(t, s), AutoApproveNew: auto}, "op")
			if err != nil || rec.GetStatus().GetError() != "" {
				t.Fatalf("add: %v %s", err, rec.GetStatus().GetError())
			}
			for i := 1; i <= 20; i++ {
				s.SetTools(tool(fmt.Sprintf("r%da", i), 0), tool(fmt.Sprintf("r%db", i), 0))
				if rec, err = m.Refresh(t.Context(), "ren", "op"); err != nil || rec.GetStatus().GetError() != "" {
					t.Fatalf("refresh %d: %v %s", i, err, rec.GetStatus().GetError())
				}
				if sk := rec.GetStatus().GetSkipped(); len(sk) > 0 {
					t.Fatalf("refresh %d skipped %s: %s", i, sk[0].GetUpstreamName(), sk[0].GetReason())
				}
			}
			bounded(t, m, rec)
			if !auto {
				return
			}
			// The first names, listed again: the one changed waits for
			// an operator, the one as approved is published again.
			s.SetTools(tool("r0a", 1), tool("r0b", 0))
			if rec, err = m.Refresh(t.Context(), "ren", "op"); err != nil {
				t.Fatal(err)
			}
			if st := acquired(t, rec, "ren.r0a").GetState(); st != sharedosv1.UpstreamToolState_UPSTREAM_TOOL_STATE_QUARANTINED {
				t.Errorf("ren.r0a changed is %s, want it quarantined", st)
			}
			if st := acquired(t, rec, "ren.r0b").GetState(); st != sharedosv1.UpstreamToolState_UPSTREAM_TOOL_STATE_PUBLISHED {
				t.Errorf("ren.r0b as approved is %s, want it published", st)
			}
			bounded(t, m, rec)
		})
	}
}
