package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/sharedos/toolshare/services/systemtest/launch"
	"github.com/sharedos/toolshare/services/tools/column/driver"
	"github.com/sharedos/toolshare/services/tools/opsjson"
)

// TestColumnDriverScripted drives the demo turn of the real stack with the
// vendor-shape driver (services/tools/column/driver): for each vendor shape,
// a scripted files.read of /public/a.txt (succeeded) and of /private/a.txt
// (denied), each under the name the vendor catalogue gave it. Each call
// leaves exactly one kernel record, and the Observation the driver read from
// the answer is that record: its callId, decisionId, status and code (every
// answer carries its outcome, a success too). A call
// under a name the catalogue does not have is sent as written and refused
// by the kernel.
func TestColumnDriverScripted(t *testing.T) {
	s := startStack(t, launch.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	turn, err := driver.Open(ctx, s.Demo.MCPURL, s.Demo.Token, driver.Options{})
	if err != nil {
		t.Fatalf("open the demo turn: %v", err)
	}
	defer turn.Close()
	var names []string
	for _, tl := range turn.Tools() {
		names = append(names, tl.Name)
	}
	if !slices.Equal(names, s.Demo.Tools) {
		t.Fatalf("the driver's catalogue %v, want the pinned %v", names, s.Demo.Tools)
	}

	// The schemas the driver renders are the published ones.
	var alice listed
	s.ctlJSON(t, &alice, "tools", "list", "--principal", "alice", "--role", "engineer")
	for i, tl := range turn.Tools() {
		if i >= len(alice.Tools) || !sameJSON(t, tl.InputSchema, alice.Tools[i].InputSchema) {
			t.Errorf("%s: the driver's inputSchema %s is not the published one", tl.Name, tl.InputSchema)
		}
	}

	type step struct {
		obs                driver.Observation
		tool, status, code string
	}
	var steps []step
	for _, v := range driver.Vendors() {
		cat, err := turn.Catalogue(v)
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		name, ok := cat.VendorName("files.read")
		if !ok || name != "files_read" {
			t.Fatalf("%s: files.read is %q (%v) on the vendor's wire, want files_read", v, name, ok)
		}
		for _, a := range []struct{ id, name, args, tool, status, code string }{
			{string(v) + "-public", name, `{"path":"/public/a.txt"}`, "files.read", "succeeded", ""},
			{string(v) + "-private", name, `{"path":"/private/a.txt"}`, "files.read", "denied", "permission_denied"},
			// Not in the catalogue: sent under that exact name, refused and
			// recorded by the kernel.
			{string(v) + "-unlisted", "github_search", `{"q":"x"}`, "github_search", "denied", "tool_unavailable"},
		} {
			result, obs, err := turn.Execute(ctx, cat, cat.CallItem(a.id, a.name, json.RawMessage(a.args)))
			if err != nil {
				t.Fatalf("%s %s: %v", v, a.id, err)
			}
			if obs.VendorCallID != a.id || obs.Tool != a.tool || obs.Status != a.status || obs.Code != a.code {
				t.Errorf("%s %s: observation %+v, want %s %s/%s", v, a.id, obs, a.tool, a.status, a.code)
			}
			if !json.Valid(result) {
				t.Errorf("%s %s: result is not JSON: %s", v, a.id, result)
			}
			t.Logf("%s %s → %s", v, a.id, result)
			steps = append(steps, step{obs, a.tool, a.status, a.code})
		}
	}

	var ops []opsjson.Operation
	s.ctlJSON(t, &ops, "ops", "list", "--turn", s.Demo.TurnID)
	if len(ops) != len(steps) {
		t.Fatalf("%d records for %d calls: %+v", len(ops), len(steps), ops)
	}
	used := make([]bool, len(ops))
	for _, st := range steps {
		i := -1
		for j, o := range ops {
			switch {
			case used[j]:
			case st.obs.CallID != "" && o.CallID == st.obs.CallID:
				// Every answer names its record, a success too.
				i = j
			}
		}
		if i < 0 {
			t.Errorf("%s (callId %q): no record of its own among %+v", st.obs.VendorCallID, st.obs.CallID, ops)
			continue
		}
		used[i] = true
		o := ops[i]
		if o.Tool != st.tool || o.Status != st.status || o.Code != st.code {
			t.Errorf("%s: record %+v, want %s %s/%s", st.obs.VendorCallID, o, st.tool, st.status, st.code)
		}
		if !st.obs.Outcome || st.obs.DecisionID != o.DecisionID {
			t.Errorf("%s: observation %+v, its record %+v", st.obs.VendorCallID, st.obs, o)
		}
	}
}

// sameJSON reports whether a and b are the same JSON text once compacted.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var ca, cb bytes.Buffer
	if err := json.Compact(&ca, a); err != nil {
		t.Fatal(err)
	}
	if err := json.Compact(&cb, b); err != nil {
		t.Fatal(err)
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}
