package pipeline

import (
	"unicode/utf8"

	"google.golang.org/grpc/codes"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/accesscontext"
)

// Error is a pipeline error meaning a request could not be taken at all;
// every attempt that could be taken is answered with a ToolResult instead.
// It carries its gRPC code and ErrorInfo reason for the service's one error
// mapper (server.ToStatus, which imports this package, never the reverse),
// and its text is safe to show a client.
type Error struct {
	code   codes.Code
	reason string
	msg    string
}

func (e *Error) Error() string { return e.msg }

// GRPCCode is the gRPC code the error maps to.
func (e *Error) GRPCCode() codes.Code { return e.code }

// ErrorReason is its google.rpc.ErrorInfo reason.
func (e *Error) ErrorReason() string { return e.reason }

// FieldError is a request without a usable field: the field and the rule it
// broke (InvalidArgument on the wire).
type FieldError struct {
	Field, Rule string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Rule }

func invalid(field, rule string) error { return &FieldError{Field: field, Rule: rule} }

// ErrRecordUnavailable: the pending record could not be written, so the call
// was refused before anything else happened.
var ErrRecordUnavailable = &Error{codes.Unavailable, "OPERATION_RECORD_UNAVAILABLE",
	"the operation record could not be written; the call was not run"}

// ErrRecordsUnreadable: ListOperations could not read the records.
var ErrRecordsUnreadable = &Error{codes.Unavailable, "OPERATION_RECORD_UNAVAILABLE",
	"operation records are unavailable"}

// checkIDs refuses a ToolCall without usable call and turn ids: without them
// the attempt cannot be keyed, deduplicated or listed.
func checkIDs(call *sharedosv1.ToolCall) error {
	if err := checkID("call_id", call.GetCallId()); err != nil {
		return err
	}
	return checkID("turn_id", call.GetTurnId())
}

// checkID refuses an unusable call or turn id.
func checkID(field, v string) error {
	switch {
	case v == "":
		return invalid(field, "is required")
	case len(v) > MaxIDBytes:
		return invalid(field, "must be at most 256 bytes")
	case !utf8.ValidString(v) || containsControl(v):
		return invalid(field, "must be printable UTF-8 without control characters")
	}
	return nil
}

// checkText refuses a declared string (a harness name, a model) that is
// too long or not printable by the rule a context's strings keep
// (accesscontext.Printable: valid UTF-8 without control or format
// characters); empty is allowed.
func checkText(field, v string) error {
	switch {
	case v == "":
		return nil
	case len(v) > MaxIDBytes:
		return invalid(field, "must be at most 256 bytes")
	}
	if rule := accesscontext.Printable(v); rule != "" {
		return invalid(field, rule)
	}
	return nil
}

func containsControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return true
		}
	}
	return false
}
