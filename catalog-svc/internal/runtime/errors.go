package runtime

import (
	"unicode/utf8"

	"google.golang.org/grpc/codes"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"

	"github.com/sharedos/toolshare/catalog-svc/internal/server"
)

// Error is a kernel error meaning a request could not be taken at all; every
// attempt that could be taken is answered with a ToolResult instead. It
// carries its gRPC code and ErrorInfo reason for server.ToStatus, the
// service's one error mapper, and its text is safe to show a client.
type Error struct {
	code   codes.Code
	reason string
	msg    string
}

func (e *Error) Error() string { return e.msg }

// GRPCCode implements server.Coded.
func (e *Error) GRPCCode() codes.Code { return e.code }

// ErrorReason implements server.Coded.
func (e *Error) ErrorReason() string { return e.reason }

var _ server.Coded = (*Error)(nil)

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
	for _, f := range []struct{ name, v string }{{"call_id", call.GetCallId()}, {"turn_id", call.GetTurnId()}} {
		switch {
		case f.v == "":
			return server.InvalidArgument(f.name, "is required")
		case len(f.v) > MaxIDBytes:
			return server.InvalidArgument(f.name, "must be at most 256 bytes")
		case !utf8.ValidString(f.v) || containsControl(f.v):
			return server.InvalidArgument(f.name, "must be printable UTF-8 without control characters")
		}
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
