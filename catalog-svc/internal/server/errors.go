package server

import (
	"context"
	"errors"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sharedos/toolshare/catalog-svc/internal/catalog"
)

// ErrorDomain is the google.rpc.ErrorInfo domain of every status this
// service returns.
const ErrorDomain = "sharedos.io"

// ErrorInfo reasons. They are API: clients switch on them, so they never
// change meaning.
const (
	ReasonInvalidRegistration = "INVALID_REGISTRATION"
	ReasonInvalidArgument     = "INVALID_ARGUMENT"
	ReasonToolNotFound        = "TOOL_NOT_FOUND"
	ReasonToolAlreadyExists   = "TOOL_ALREADY_EXISTS"
	ReasonRevisionMismatch    = "REVISION_MISMATCH"
	ReasonAuthzUnavailable    = "AUTHZ_UNAVAILABLE"
	ReasonCatalogNotReady     = "CATALOG_NOT_READY"
	ReasonCancelled           = "CANCELLED"
	ReasonDeadlineExceeded    = "DEADLINE_EXCEEDED"
	ReasonInternal            = "INTERNAL"
)

// Coded is implemented by domain errors of other packages of this service
// (e.g. the runtime's) that carry their own gRPC code and reason, so that
// ToStatus stays the one mapper without importing them. Error() must be
// safe to show a client.
type Coded interface {
	error
	GRPCCode() codes.Code
	ErrorReason() string
}

// ToStatus maps err to a gRPC status error. nil stays nil.
func ToStatus(err error) error {
	if err == nil {
		return nil
	}
	var ve *catalog.ValidationError
	var coded Coded
	switch {
	case errors.As(err, &ve):
		st := withDetails(codes.InvalidArgument, ve.Error(), ReasonInvalidRegistration,
			map[string]string{"field": ve.Field, "rule": ve.Rule},
			&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{
				Field: ve.Field, Description: ve.Rule + ": " + ve.Detail, Reason: ve.Rule,
			}}})
		return st.Err()
	case errors.Is(err, catalog.ErrNotFound):
		return withDetails(codes.NotFound, err.Error(), ReasonToolNotFound, nil).Err()
	case errors.Is(err, catalog.ErrAlreadyExists):
		return withDetails(codes.AlreadyExists, err.Error(), ReasonToolAlreadyExists, nil).Err()
	case errors.Is(err, catalog.ErrRevisionMismatch):
		// Aborted, not FailedPrecondition: the client should re-read and
		// retry the read-modify-write (AIP-154 etag semantics).
		return withDetails(codes.Aborted, err.Error(), ReasonRevisionMismatch, nil).Err()
	case errors.Is(err, catalog.ErrAuthzUnavailable):
		// Fixed text: the cause is an internal address or transport error.
		return withDetails(codes.Unavailable, "authorization service unavailable; no catalogue returned", ReasonAuthzUnavailable, nil).Err()
	case errors.Is(err, catalog.ErrNotReady):
		return withDetails(codes.Unavailable, "catalogue not loaded yet", ReasonCatalogNotReady, nil).Err()
	case errors.As(err, &coded):
		return withDetails(coded.GRPCCode(), coded.Error(), coded.ErrorReason(), nil).Err()
	case errors.Is(err, context.Canceled):
		return withDetails(codes.Canceled, "request cancelled", ReasonCancelled, nil).Err()
	case errors.Is(err, context.DeadlineExceeded):
		return withDetails(codes.DeadlineExceeded, "deadline exceeded", ReasonDeadlineExceeded, nil).Err()
	}
	// A status created by this service's own handlers (e.g. a missing
	// request field) passes through; it is never a wrapped driver error,
	// because only an unwrapped status is accepted.
	if st, ok := err.(interface{ GRPCStatus() *status.Status }); ok {
		return st.GRPCStatus().Err()
	}
	return withDetails(codes.Internal, "internal error", ReasonInternal, nil).Err()
}

// InvalidArgument is a request-shape error (a missing field) as a status.
func InvalidArgument(field, msg string) error {
	return withDetails(codes.InvalidArgument, field+": "+msg, ReasonInvalidArgument, map[string]string{"field": field},
		&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: field, Description: msg}}}).Err()
}

func withDetails(code codes.Code, msg, reason string, md map[string]string, extra ...*errdetails.BadRequest) *status.Status {
	st := status.New(code, msg)
	info := &errdetails.ErrorInfo{Reason: reason, Domain: ErrorDomain, Metadata: md}
	var err error
	if len(extra) > 0 {
		st, err = st.WithDetails(info, extra[0])
	} else {
		st, err = st.WithDetails(info)
	}
	if err != nil {
		// Details only fail to marshal on programmer error; the code and
		// message still carry the meaning.
		return status.New(code, msg)
	}
	return st
}
