package records

import (
	"google.golang.org/protobuf/types/known/timestamppb"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/systemidentity"
)

func toProto(r *Record) *sharedosv1.OperationRecord {
	p := &sharedosv1.OperationRecord{
		Sequence:            r.Sequence,
		CallId:              r.CallID,
		TurnId:              r.TurnID,
		Principal:           r.Principal,
		Tenant:              r.Tenant,
		RequestedTool:       r.RequestedTool,
		RequestedToolSha256: r.RequestedToolSHA256,
		ResolvedTool:        r.ResolvedTool,
		CatalogHash:         r.CatalogHash,
		ArgumentsDigest:     r.ArgumentsDigest,
		DecisionId:          r.DecisionID,
		PolicyRevision:      r.PolicyRevision,
		Status:              r.Status,
		Code:                r.Code,
		Reason:              r.Reason,
		TraceId:             r.TraceID,
		ProgressCount:       r.ProgressCount,
		InputRounds:         r.InputRounds,
		Kind:                r.Kind,
		DeclaredModel:       r.DeclaredModel,
		ToolPolicyDigest:    r.ToolPolicyDigest,
	}
	if r.Harness != "" || r.HarnessVersion != "" || r.MCPSupport != "" || r.Extension != "" {
		p.Harness = &sharedosv1.HarnessIdentity{Name: r.Harness, Version: r.HarnessVersion,
			McpSupport: systemidentity.ParseMCPSupport(r.MCPSupport), ExtensionName: r.Extension}
	}
	if !r.WaitingUntil.IsZero() {
		p.WaitingUntil = timestamppb.New(r.WaitingUntil)
	}
	if !r.StartedAt.IsZero() {
		p.StartedAt = timestamppb.New(r.StartedAt)
	}
	if !r.FinishedAt.IsZero() {
		p.FinishedAt = timestamppb.New(r.FinishedAt)
	}
	return p
}
