// Package opsjson is the JSON shape of operation records and of a run's
// SystemIdentity, as sharedosctl prints them (`ops list`) and column
// reports hold them.
package opsjson

import (
	"time"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/outcome"
	"github.com/sharedos/toolshare/services/contract/systemidentity"
)

// Operation is one operation record: an `ops list` row, and a column
// report's operations.
type Operation struct {
	Sequence        int64  `json:"sequence"`
	CallID          string `json:"callId"`
	TurnID          string `json:"turnId"`
	Principal       string `json:"principal"`
	Tool            string `json:"tool"`
	ToolSHA256      string `json:"toolSha256"`
	ResolvedTool    string `json:"resolvedTool,omitempty"`
	CatalogHash     string `json:"catalogHash,omitempty"`
	ArgumentsDigest string `json:"argumentsDigest,omitempty"`
	Status          string `json:"status"`
	Code            string `json:"code"`
	Reason          string `json:"reason"`
	DecisionID      string `json:"decisionId"`
	PolicyRevision  string `json:"policyRevision,omitempty"`
	StartedAt       string `json:"startedAt,omitempty"`
	FinishedAt      string `json:"finishedAt,omitempty"`
	TraceID         string `json:"traceId,omitempty"`
	ProgressCount   int32  `json:"progressCount,omitempty"`
	// InputRounds and WaitingUntil: the times the call asked the client for
	// input, and until when it waits for the answer (ADR 0017).
	InputRounds  int32  `json:"inputRounds,omitempty"`
	WaitingUntil string `json:"waitingUntil,omitempty"`
	// Kind is prompt or resource for a prompts/get or resources/read (tool
	// is then the prompt's name or the resource's URI); absent for a tool.
	Kind string `json:"kind,omitempty"`
	// SystemIdentity is the run's identity the record carries from its
	// turn's grant (ADR 0014).
	SystemIdentity SystemIdentity `json:"systemIdentity"`
}

// SystemIdentity is a run's SystemIdentity as `ops list` and column
// reports print it: what makes two runs comparable (the same catalogHash
// means the same tool set). toolPolicy is the ToolPolicy's digest.
type SystemIdentity struct {
	CatalogHash    string `json:"catalogHash"`
	Harness        string `json:"harness"`
	HarnessVersion string `json:"harnessVersion"`
	MCPSupport     string `json:"mcpSupport"`
	Extension      string `json:"extension"`
	DeclaredModel  string `json:"declaredModel"`
	ToolPolicy     string `json:"toolPolicy"`
}

// Of is r as JSON.
func Of(r *sharedosv1.OperationRecord) Operation {
	o := Operation{
		Sequence: r.GetSequence(), CallID: r.GetCallId(), TurnID: r.GetTurnId(), Principal: r.GetPrincipal(),
		Tool: r.GetRequestedTool(), ToolSHA256: r.GetRequestedToolSha256(), ResolvedTool: r.GetResolvedTool(),
		CatalogHash: r.GetCatalogHash(), ArgumentsDigest: r.GetArgumentsDigest(), Status: outcome.StatusName(r.GetStatus()),
		Code: r.GetCode(), Reason: r.GetReason(), DecisionID: r.GetDecisionId(), PolicyRevision: r.GetPolicyRevision(),
		TraceID: r.GetTraceId(), ProgressCount: r.GetProgressCount(), InputRounds: r.GetInputRounds(),
		SystemIdentity: SystemIdentity{
			CatalogHash: r.GetCatalogHash(), Harness: r.GetHarness().GetName(), HarnessVersion: r.GetHarness().GetVersion(),
			MCPSupport: systemidentity.MCPSupportName(r.GetHarness().GetMcpSupport()), Extension: r.GetHarness().GetExtensionName(),
			DeclaredModel: r.GetDeclaredModel(), ToolPolicy: r.GetToolPolicyDigest(),
		},
	}
	switch r.GetKind() {
	case sharedosv1.CallKind_CALL_KIND_PROMPT:
		o.Kind = "prompt"
	case sharedosv1.CallKind_CALL_KIND_RESOURCE:
		o.Kind = "resource"
	}
	if r.GetWaitingUntil() != nil {
		o.WaitingUntil = r.GetWaitingUntil().AsTime().UTC().Format(time.RFC3339Nano)
	}
	if r.GetStartedAt() != nil {
		o.StartedAt = r.GetStartedAt().AsTime().UTC().Format(time.RFC3339Nano)
	}
	if r.GetFinishedAt() != nil {
		o.FinishedAt = r.GetFinishedAt().AsTime().UTC().Format(time.RFC3339Nano)
	}
	return o
}
