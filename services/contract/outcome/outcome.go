package outcome

import (
	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
)

// MetaKey is the _meta key under which every tools/call answer carries its
// outcome: a refusal, and a success (with the record's callId, issue 21).
const MetaKey = "io.sharedos/outcome"

// Codes of denied outcomes.
const (
	PermissionDenied = "permission_denied"
	ToolUnavailable  = "tool_unavailable"
	// DuplicateCall refuses a callId already used in the same turn: InvokeTool
	// is not idempotent, so a repeat is never run twice.
	DuplicateCall = "duplicate_call"
	// InvalidGrant refuses a call whose turn grant is missing, forged,
	// altered, expired, revoked (the turn was closed) or another turn's:
	// nothing ran (ADR 0015).
	InvalidGrant = "invalid_grant"
)

// Codes of failed outcomes.
const (
	InvalidArguments = "invalid_arguments"
	// InvalidRequest records an attempt the bridge refused as a protocol
	// error before dispatch (ToolCall.edge_rejection); nothing ran.
	InvalidRequest   = "invalid_request"
	HandlerError     = "handler_error"
	Timeout          = "timeout"
	AuthzUnavailable = "authz_unavailable"
	AuthzError       = "authz_error"
	// MissingCapability: the tool needs input the client did not declare it
	// can give (an input request it cannot answer, or input rounds at all
	// on a protocol version without them); the tool stopped there.
	MissingCapability = "missing_capability"
	// ToolError: an upstream MCP server's tool answered isError (ADR 0019);
	// its content is kept.
	ToolError = "tool_error"
	// UpstreamUnavailable: an upstream MCP server could not be reached or
	// answered outside the protocol. Without an answer nothing is known to
	// have run; an answer a client would refuse (malformed content, a
	// structuredContent missing or not valid against the tool's output
	// schema, a read's contents that name another resource) is not passed
	// on, though the tool ran.
	UpstreamUnavailable = "upstream_unavailable"
	// RecordUnavailable: the call ended but its operation record could not
	// be completed before the answer had to leave; the reason names the
	// outcome, and its effect may have happened. The record says the same
	// once the store is back.
	RecordUnavailable = "record_unavailable"
	Internal          = "internal"
)

// authz-svc's google.rpc.ErrorInfo for an evaluation that made no decision
// (docs/errors.md): authz-svc sends it and the kernel records AuthzError on
// it whatever the gRPC code — an evaluation past authz-svc's --eval-timeout
// is DeadlineExceeded, like an authz-svc that did not answer in time, which
// is AuthzUnavailable.
const (
	ErrorDomainAuthz     = "authz.sharedos.io"
	ReasonAuthzEvalError = "AUTHZ_EVAL_ERROR"
)

// Cancelled is the code of a cancelled outcome.
const Cancelled = "cancelled"

// Text prefixes a model reads.
const (
	DeniedPrefix = "denied: "
	FailedPrefix = "failed: "
)

var statusNames = map[sharedosv1.OperationStatus]string{
	sharedosv1.OperationStatus_OPERATION_STATUS_PENDING:     "pending",
	sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED:   "succeeded",
	sharedosv1.OperationStatus_OPERATION_STATUS_DENIED:      "denied",
	sharedosv1.OperationStatus_OPERATION_STATUS_FAILED:      "failed",
	sharedosv1.OperationStatus_OPERATION_STATUS_CANCELLED:   "cancelled",
	sharedosv1.OperationStatus_OPERATION_STATUS_INTERRUPTED: "interrupted",
	// An answer's status, never a record's (the record stays pending).
	sharedosv1.OperationStatus_OPERATION_STATUS_INPUT_REQUIRED: "input_required",
}

// StatusName is the lower-case name of a status as records and _meta show it.
func StatusName(s sharedosv1.OperationStatus) string {
	if n, ok := statusNames[s]; ok {
		return n
	}
	return "unspecified"
}

// ParseStatus is the inverse of StatusName; ok is false for an unknown name.
func ParseStatus(name string) (sharedosv1.OperationStatus, bool) {
	for s, n := range statusNames {
		if n == name {
			return s, true
		}
	}
	return sharedosv1.OperationStatus_OPERATION_STATUS_UNSPECIFIED, false
}

var deniedCodes = map[string]bool{PermissionDenied: true, ToolUnavailable: true, DuplicateCall: true, InvalidGrant: true}

var failedCodes = map[string]bool{
	InvalidArguments: true, InvalidRequest: true, HandlerError: true, Timeout: true,
	AuthzUnavailable: true, AuthzError: true, MissingCapability: true, ToolError: true, UpstreamUnavailable: true,
	RecordUnavailable: true, Internal: true,
}

// IsDeniedCode reports whether code belongs to the denied status.
func IsDeniedCode(code string) bool { return deniedCodes[code] }

// IsFailedCode reports whether code belongs to the failed status.
func IsFailedCode(code string) bool { return failedCodes[code] }

// Denied builds a denied result. It panics on a code that is not a denied
// code: mixing a denial into the failed family (or back) is a programming
// error that would make the denial rate uncountable.
func Denied(code, reason string) *sharedosv1.ToolResult {
	if !deniedCodes[code] {
		panic("outcome: " + code + " is not a denied code")
	}
	return &sharedosv1.ToolResult{Status: sharedosv1.OperationStatus_OPERATION_STATUS_DENIED, Code: code, Reason: reason}
}

// Failed builds a failed result; it panics on a code that is not a failed code.
func Failed(code, reason string) *sharedosv1.ToolResult {
	if !failedCodes[code] {
		panic("outcome: " + code + " is not a failed code")
	}
	return &sharedosv1.ToolResult{Status: sharedosv1.OperationStatus_OPERATION_STATUS_FAILED, Code: code, Reason: reason}
}

// CancelledResult builds the cancelled result the kernel records.
func CancelledResult(reason string) *sharedosv1.ToolResult {
	return &sharedosv1.ToolResult{Status: sharedosv1.OperationStatus_OPERATION_STATUS_CANCELLED, Code: Cancelled, Reason: reason}
}

// IsRefusal reports whether r is a denied or failed result: the two that are
// answered as MCP results with isError true.
func IsRefusal(r *sharedosv1.ToolResult) bool {
	s := r.GetStatus()
	return s == sharedosv1.OperationStatus_OPERATION_STATUS_DENIED || s == sharedosv1.OperationStatus_OPERATION_STATUS_FAILED
}

// Text is what the model reads for a refusal: "denied: <reason>" or
// "failed: <reason>". For any other status it is "".
func Text(r *sharedosv1.ToolResult) string {
	reason := r.GetReason()
	if reason == "" {
		reason = r.GetCode()
	}
	switch r.GetStatus() {
	case sharedosv1.OperationStatus_OPERATION_STATUS_DENIED:
		return DeniedPrefix + reason
	case sharedosv1.OperationStatus_OPERATION_STATUS_FAILED:
		return FailedPrefix + reason
	default:
		return ""
	}
}

// Meta is the value of _meta["io.sharedos/outcome"] for r.
func Meta(r *sharedosv1.ToolResult) map[string]any {
	m := map[string]any{
		"status": StatusName(r.GetStatus()),
		"code":   r.GetCode(),
		"callId": r.GetCallId(),
	}
	if r.GetDecisionId() != "" {
		m["decisionId"] = r.GetDecisionId()
	}
	return m
}
