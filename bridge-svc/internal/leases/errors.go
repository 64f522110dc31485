package leases

import (
	"context"
	"errors"

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
	switch {
	case err == nil:
		return nil
	case errors.As(err, &fe):
		return withInfo(codes.InvalidArgument, fe.Error(), ReasonInvalidField, map[string]string{"field": fe.Field})
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
