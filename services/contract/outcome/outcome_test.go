package outcome_test

import (
	"fmt"
	"testing"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/outcome"
)

func TestDeniedAndFailedStayDistinguishable(t *testing.T) {
	d := outcome.Denied(outcome.PermissionDenied, "path /private/a.txt is not readable")
	f := outcome.Failed(outcome.AuthzUnavailable, "policy decision point unreachable")
	if got := outcome.Text(d); got != "denied: path /private/a.txt is not readable" {
		t.Errorf("denied text = %q", got)
	}
	if got := outcome.Text(f); got != "failed: policy decision point unreachable" {
		t.Errorf("failed text = %q", got)
	}
	if outcome.Meta(d)["status"] == outcome.Meta(f)["status"] {
		t.Error("denied and failed share a status in _meta")
	}
	if !outcome.IsRefusal(d) || !outcome.IsRefusal(f) {
		t.Error("denied and failed must both be refusals")
	}
	if outcome.IsRefusal(&sharedosv1.ToolResult{Status: sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED}) {
		t.Error("succeeded is not a refusal")
	}
}

func TestCodeFamiliesAreDisjoint(t *testing.T) {
	for _, c := range []string{outcome.PermissionDenied, outcome.ToolUnavailable, outcome.DuplicateCall} {
		if !outcome.IsDeniedCode(c) || outcome.IsFailedCode(c) {
			t.Errorf("%s must be denied only", c)
		}
	}
	for _, c := range []string{outcome.InvalidArguments, outcome.InvalidRequest, outcome.HandlerError, outcome.Timeout, outcome.AuthzUnavailable, outcome.AuthzError, outcome.Internal} {
		if !outcome.IsFailedCode(c) || outcome.IsDeniedCode(c) {
			t.Errorf("%s must be failed only", c)
		}
	}
}

func TestMixingFamiliesPanics(t *testing.T) {
	for name, f := range map[string]func(){
		"denied with failed code": func() { outcome.Denied(outcome.AuthzError, "x") },
		"failed with denied code": func() { outcome.Failed(outcome.PermissionDenied, "x") },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			f()
		})
	}
}

func TestStatusNamesRoundTrip(t *testing.T) {
	for v := range sharedosv1.OperationStatus_name {
		s := sharedosv1.OperationStatus(v)
		if s == sharedosv1.OperationStatus_OPERATION_STATUS_UNSPECIFIED {
			continue
		}
		got, ok := outcome.ParseStatus(outcome.StatusName(s))
		if !ok || got != s {
			t.Errorf("round trip of %v gave %v, %v", s, got, ok)
		}
	}
	if _, ok := outcome.ParseStatus("allowed"); ok {
		t.Error("unknown status parsed")
	}
}

func ExampleText() {
	r := outcome.Denied(outcome.ToolUnavailable, `tool "github.delete_repo" is not in this turn's catalogue`)
	r.CallId = "c-1"
	fmt.Println(outcome.Text(r))
	fmt.Println(outcome.Meta(r))
	// Output:
	// denied: tool "github.delete_repo" is not in this turn's catalogue
	// map[callId:c-1 code:tool_unavailable status:denied]
}
