package leases

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sharedos/toolshare/services/platform/grpcx"
)

// ErrorDomain is the google.rpc.ErrorInfo domain of every bridge error.
const ErrorDomain = "bridge.sharedos.io"

// ErrorInfo reasons.
const (
	ReasonInvalidField       = "INVALID_FIELD"
	ReasonTurnNotFound       = "TURN_NOT_FOUND"
	ReasonCatalogUnavailable = "CATALOG_UNAVAILABLE"
	ReasonStoreUnavailable   = "STORE_UNAVAILABLE"
	ReasonCatalogUnservable  = "CATALOG_UNSERVABLE"
	// ReasonGrantRefused: the kernel refused the turn's grant for a reason
	// a retry does not change (FailedPrecondition; its reason in metadata
	// kernel_reason).
	ReasonGrantRefused = "GRANT_REFUSED"
	// ReasonRevocationUnconfirmed: CloseTurn could not confirm that the
	// kernel revoked the turn; the lease stays open, and a retry is safe.
	ReasonRevocationUnconfirmed = "REVOCATION_UNCONFIRMED"
	ReasonInternal              = "INTERNAL"
)

// FieldError is a bad input: the field it concerns and the rule it broke.
type FieldError struct {
	Field string
	Rule  string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Rule }

func fieldError(field, rule string) error { return &FieldError{Field: field, Rule: rule} }

// grantRefused is the kernel's FailedPrecondition at GrantTurn: the
// request can never be granted as it is, so it is no outage; its message
// is the kernel's (safe to show) and reason its ErrorInfo reason.
type grantRefused struct {
	msg, reason string
}

func (e *grantRefused) Error() string { return "leases: the kernel refused the grant: " + e.msg }

// kernelError classifies a GrantTurn error: the kernel's InvalidArgument
// is the request's own field (the kernel names GrantTurnRequest's fields,
// which are OpenTurnRequest's: context.*, harness.*, declared_model) and
// its FailedPrecondition a grant it will not give; both are answered as
// what they are. Everything else (Unavailable, DeadlineExceeded, Internal,
// ...) is errCatalog: no catalogue could be had, no lease is opened.
func kernelError(err error) error {
	st, ok := status.FromError(err)
	if ok {
		switch st.Code() {
		case codes.InvalidArgument:
			for _, d := range st.Details() {
				if br, ok := d.(*errdetails.BadRequest); ok {
					for _, v := range br.GetFieldViolations() {
						if v.GetField() != "" {
							return fieldError(v.GetField(), v.GetDescription())
						}
					}
				}
			}
			return fieldError("request", st.Message())
		case codes.FailedPrecondition:
			_, reason := grpcx.ErrorReason(err)
			return &grantRefused{msg: st.Message(), reason: reason}
		}
	}
	return fmt.Errorf("%w: %w", errCatalog, err)
}

var (
	errCatalog = errors.New("leases: kernel GrantTurn failed")
	errStore   = errors.New("leases: lease store failed")
	// errUnservable wraps a catalogue tool the MCP edge cannot publish.
	errUnservable = errors.New("leases: catalogue cannot be served over MCP")
	// errTokenExpiring: the user token ends before a turn could be used.
	errTokenExpiring = errors.New("user_token: expires before a turn could be used")
)

// toStatus is the service's one error mapper: domain errors become a gRPC
// status with an ErrorInfo reason; driver and upstream text never leaks.
func toStatus(err error) error {
	var fe *FieldError
	var gr *grantRefused
	switch {
	case err == nil:
		return nil
	case errors.As(err, &fe):
		return grpcx.Error(codes.InvalidArgument, fe.Error(), ErrorDomain, ReasonInvalidField, map[string]string{"field": fe.Field},
			grpcx.FieldViolation(fe.Field, fe.Rule))
	case errors.As(err, &gr):
		return withInfo(codes.FailedPrecondition, gr.msg+"; no lease opened", ReasonGrantRefused, map[string]string{"kernel_reason": gr.reason})
	case errors.Is(err, ErrNotFound):
		return withInfo(codes.NotFound, "turn not found", ReasonTurnNotFound, nil)
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, "cancelled")
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, "deadline exceeded")
	case errors.Is(err, errCatalog):
		// A catalogue we could not get is never replaced by a guess: no lease.
		return withInfo(codes.Unavailable, "catalog unavailable: no lease opened", ReasonCatalogUnavailable, nil)
	case errors.Is(err, errUnservable):
		// The tool's name is safe to show (it is in the catalogue); the
		// cause stays in the log.
		return withInfo(codes.FailedPrecondition, "the context's catalogue holds a tool the bridge cannot publish over MCP; no lease opened",
			ReasonCatalogUnservable, nil)
	case errors.Is(err, errTokenExpiring):
		return status.Error(codes.Unauthenticated, errTokenExpiring.Error())
	case errors.Is(err, errStore):
		return withInfo(codes.Unavailable, "lease store unavailable", ReasonStoreUnavailable, nil)
	default:
		return withInfo(codes.Internal, "internal error", ReasonInternal, nil)
	}
}

func withInfo(c codes.Code, msg, reason string, md map[string]string) error {
	return grpcx.Error(c, msg, ErrorDomain, reason, md)
}
