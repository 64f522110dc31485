package app_test

import (
	"strings"
	"testing"

	"github.com/sharedos/toolshare/bridge-svc/internal/bridgetest"
)

// TestRefusedArgumentValueNotRecorded (invariant 11): a tools/call whose
// arguments mcp-go cannot decode (a number past float64's range) is
// refused before the handler and recorded with mcp-go's reason — without
// the value it quotes, in either era.
func TestRefusedArgumentValueNotRecorded(t *testing.T) {
	f := &fixture{catalog: &bridgetest.FakeCatalog{}, kernel: bridgetest.NewFakeKernel()}
	addr := bridgetest.ServeFakes(t, f.catalog, f.kernel)
	f.bridge = bridgetest.Start(t, addr, "")
	tr := f.bridge.Open(t)
	const value = "4111222333e300"
	args := `{"path":"/public/a.txt","pin":` + value + `}`
	legacy := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"files.read","arguments":` + args + `}}`
	for _, tc := range []struct {
		name string
		req  rawReq
	}{
		{"2026-07-28", rawReq{body: modernCall(1, "files.read", args), modern: true}},
		{"2025-11-25", rawReq{body: legacy, headers: legacySession(t, tr)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.url, tc.req.token = tr.GetMcpUrl(), tr.GetToken()
			before := len(f.kernel.Calls())
			resp := do(t, tc.req)
			calls := f.kernel.Calls()[before:]
			if len(calls) != 1 || !strings.HasPrefix(calls[0].GetEdgeRejection(), "refused by the MCP server") {
				t.Fatalf("%d %s; kernel saw %v, want one record-only rejection", resp.status, resp.body, calls)
			}
			if r := calls[0].GetEdgeRejection(); strings.Contains(r, "4111222333") || !strings.Contains(r, "number …") {
				t.Errorf("the record's reason: %q, want the number left out", r)
			}
		})
	}
}
