package upstream_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"google.golang.org/protobuf/proto"

	"github.com/sharedos/toolshare/catalog-svc/internal/store/memory"
	"github.com/sharedos/toolshare/catalog-svc/internal/upstream"
	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
)

// TestAListingIsBounded: an upstream that lists more than 1,000 tools, or
// prompts, is refused with the reason in its status, and nothing of that
// kind is acquired in part; 1,000 over several pages are acquired whole.
func TestAListingIsBounded(t *testing.T) {
	serve := func(tools, prompts int) string {
		s := server.NewMCPServer("many", "1", server.WithToolCapabilities(true), server.WithPromptCapabilities(true),
			server.WithPaginationLimit(300))
		for i := range tools {
			s.AddTool(mcp.NewTool(fmt.Sprintf("t%04d", i), mcp.WithDescription("One of many.")),
				func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					return mcp.NewToolResultText("ok"), nil
				})
		}
		for i := range prompts {
			s.AddPrompt(mcp.NewPrompt(fmt.Sprintf("p%04d", i), mcp.WithPromptDescription("One of many.")),
				func(context.Context, mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
					return &mcp.GetPromptResult{}, nil
				})
		}
		return served(t, s)
	}
	for _, c := range []struct {
		name           string
		tools, prompts int
		wantTools      int
		wantError      string
	}{
		{"1,000 tools over four pages", 1000, 0, 1000, ""},
		{"1,001 tools", 1001, 0, 0, "tools/list: more than 1000 tools"},
		{"1,001 prompts", 1, 1001, 1, "prompts/list: more than 1000 prompts"},
	} {
		t.Run(c.name, func(t *testing.T) {
			mem := memory.New()
			cat := newCatalog(t, mem)
			m := upstream.New(upstream.Config{Store: mem, Registry: cat})
			t.Cleanup(func() { _ = m.Close() })
			rec, err := m.Add(t.Context(), &sharedosv1.UpstreamProvider{Namespace: "many", Url: serve(c.tools, c.prompts), AutoApproveNew: true}, "op")
			if err != nil {
				t.Fatal(err)
			}
			if got := rec.GetStatus().GetError(); (c.wantError == "") != (got == "") || !strings.Contains(got, c.wantError) {
				t.Errorf("status error %q, want %q", got, c.wantError)
			}
			if got := len(rec.GetStatus().GetTools()); got != c.wantTools {
				t.Errorf("%d tools acquired, want %d", got, c.wantTools)
			}
			if got := len(rec.GetStatus().GetEntries()); got != 0 {
				t.Errorf("%d prompts acquired, want none", got)
			}
			if _, _, err := cat.Get(t.Context(), "many.t0000"); (err == nil) != (c.wantTools > 0) {
				t.Errorf("many.t0000 in the catalogue: %v, want it there only when the tools were acquired", err)
			}
		})
	}
}

// What a listing skips is kept in the provider's record, which every spec
// check and providers get reads: an upstream's name of 1 MiB is kept to
// 256 bytes, marked where it was cut, in the entry and in its reason.
func TestASkippedNameIsKeptShort(t *testing.T) {
	s := server.NewMCPServer("long", "1", server.WithToolCapabilities(true))
	for i := range 4 {
		s.AddTool(mcp.NewTool(fmt.Sprintf("%d%s!", i, strings.Repeat("x", 1<<20)), mcp.WithDescription("Not a valid name once qualified.")),
			func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultText("never"), nil
			})
	}
	url := served(t, s)
	mem := memory.New()
	m := managerOver(t, mem, nil)
	rec, err := m.Add(t.Context(), &sharedosv1.UpstreamProvider{Namespace: "long", Url: url, AutoApproveNew: true}, "op")
	if err != nil || rec.GetStatus().GetError() != "" {
		t.Fatalf("add: %v %s", err, rec.GetStatus().GetError())
	}
	skipped := rec.GetStatus().GetSkipped()
	if len(skipped) != 4 {
		t.Fatalf("skipped %d, want the 4 tools", len(skipped))
	}
	for _, sk := range skipped {
		if n := len(sk.GetUpstreamName()); n > 512 || !strings.Contains(sk.GetUpstreamName(), "…[cut: 1048578 bytes in all]") {
			t.Errorf("skipped name of %d bytes: %.300q", n, sk.GetUpstreamName())
		}
		if n := len(sk.GetReason()); n > 2048 || !strings.Contains(sk.GetReason(), "bytes in all]") || !strings.Contains(sk.GetReason(), "not a valid tool name") {
			t.Errorf("reason of %d bytes: %.300q", n, sk.GetReason())
		}
	}
	if n := proto.Size(rec); n > 64<<10 {
		t.Errorf("the provider's record is %d bytes", n)
	}
}

// An upstream's own strings in its initialize result — its server's name
// and version — are kept in the provider's record to 256 bytes, marked
// with the length they had: a name of 40 MiB went into every providers
// get, and two such providers made providers list fail for every
// provider.
func TestAServersNameIsKeptShort(t *testing.T) {
	name, version := strings.Repeat("N", 5<<20), strings.Repeat("1.", 1<<19)
	s := server.NewMCPServer(name, version, server.WithToolCapabilities(false))
	s.AddTool(mcp.NewTool("t", mcp.WithDescription("A test tool.")),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("ok"), nil
		})
	url := served(t, s)
	mem := memory.New()
	m := managerOver(t, mem, nil)
	for _, ns := range []string{"n1", "n2"} {
		rec, err := m.Add(t.Context(), &sharedosv1.UpstreamProvider{Namespace: ns, Url: url, AutoApproveNew: true}, "op")
		if err != nil || rec.GetStatus().GetError() != "" {
			t.Fatalf("add %s: %v %s", ns, err, rec.GetStatus().GetError())
		}
		st := rec.GetStatus()
		for _, c := range []struct{ field, got, sent string }{{"serverName", st.GetServerName(), name}, {"serverVersion", st.GetServerVersion(), version}} {
			if len(c.got) > 256 || !strings.HasPrefix(c.got, c.sent[:100]) || !strings.HasSuffix(c.got, fmt.Sprintf("…[cut: %d bytes in all]", len(c.sent))) {
				t.Errorf("%s: %s of %d bytes: %.120q", ns, c.field, len(c.got), c.got)
			}
		}
		if got, err := m.Get(t.Context(), ns); err != nil || proto.Size(got) > 16<<10 {
			t.Errorf("providers get %s: %v, %d bytes", ns, err, proto.Size(got))
		}
	}
	recs, err := m.List(t.Context())
	if n := proto.Size(&sharedosv1.ListProvidersResponse{Providers: recs}); err != nil || n > 32<<10 {
		t.Errorf("providers list: %v, %d bytes", err, n)
	}
}

// Each page of a listing is bounded as any message is, and so are its
// pages together: an upstream cannot make a listing keep 100 pages of
// the bound.
func TestAListingsPagesAreBoundedTogether(t *testing.T) {
	t.Cleanup(upstream.SetMaxResponseBytes(64 << 10)) // restored after the manager closes
	s := server.NewMCPServer("wordy", "1", server.WithToolCapabilities(true), server.WithPaginationLimit(2))
	for i := range 10 {
		s.AddTool(mcp.NewTool(fmt.Sprintf("t%d", i), mcp.WithDescription(strings.Repeat("word ", 4<<10))), // 20 KiB: 40 KiB a page
			func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultText("ok"), nil
			})
	}
	url := served(t, s)
	mem := memory.New()
	m := managerOver(t, mem, nil)
	rec, err := m.Add(t.Context(), &sharedosv1.UpstreamProvider{Namespace: "wordy", Url: url, AutoApproveNew: true}, "op")
	if err != nil {
		t.Fatal(err)
	}
	if got := rec.GetStatus().GetError(); !strings.Contains(got, "tools/list: more than 65536 bytes over its pages") {
		t.Errorf("status error %q", got)
	}
	if n := len(rec.GetStatus().GetTools()); n != 0 {
		t.Errorf("%d tools acquired of a listing refused", n)
	}
}
