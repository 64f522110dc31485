package pipeline_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sharedos/toolshare/services/contract/outcome"
)

// TestEdgeRejectionIsRecordedNeverRun: an attempt the bridge refused as a
// protocol error (Mcp-Name header ≠ body) leaves exactly one record and
// reaches neither the policy nor the handler.
func TestEdgeRejectionIsRecordedNeverRun(t *testing.T) {
	forEachStore(t, options{}, func(t *testing.T, h *harness) {
		call := h.newCall("t", "files.write", `{"path":"/public/x.txt","content":"x"}`)
		call.EdgeRejection = `Mcp-Name header "files.read" does not match params.name "files.write"`
		res, err := h.invoke(context.Background(), call)
		if err != nil {
			t.Fatal(err)
		}
		expect(t, res, failed, outcome.InvalidRequest)
		if n := h.handler.calls.Load(); n != 0 {
			t.Fatalf("handler ran %d times", n)
		}
		if n := h.authz.calls.Load(); n != 0 {
			t.Fatalf("authz asked %d times", n)
		}
		rows := h.records("t")
		if len(rows) != 1 || rows[0].RequestedTool != "files.write" || rows[0].Code != outcome.InvalidRequest ||
			!strings.Contains(rows[0].Reason, `"files.read"`) || rows[0].ResolvedTool != "" {
			t.Fatalf("records = %+v", rows)
		}
	})
}
