package decisionlog

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/sharedos/toolshare/services/contract/redact"
)

func TestWriteCancelledContextAndFields(t *testing.T) {
	var buf bytes.Buffer
	lg := New(slog.NewJSONHandler(&buf, nil))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	lg.Write(ctx, Record{
		Kind: KindAuthorize, DecisionID: "d1", Revision: "sha256:r", Principal: "p", Tool: "files.read",
		Action: "read", Resource: "file:/a", ArgumentsDigest: redact.ArgumentsDigest([]byte(`{"a":"secret"}`)),
		Result: ResultDeny, Reason: "no", Duration: 1500 * time.Microsecond,
	})
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatalf("record is not one JSON object: %v: %s", err, buf.String())
	}
	want := map[string]any{
		"msg": Message, "log_type": "decision", "kind": "authorize", "decision_id": "d1",
		"policy_revision": "sha256:r", "principal": "p", "tool": "files.read", "action": "read",
		"resource": "file:/a", "result": "deny", "reason": "no", "duration_us": float64(1500),
		"arguments_digest": redact.ArgumentsDigest([]byte(`{"a":"secret"}`)),
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %v, want %v", k, m[k], v)
		}
	}
	if _, ok := m["trace_id"]; ok {
		t.Error("trace_id written without a span in the context")
	}
	if bytes.Contains(buf.Bytes(), []byte("secret")) {
		t.Error("raw argument value in the record")
	}
}
