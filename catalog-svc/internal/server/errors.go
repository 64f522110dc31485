package server

import (
	"context"
	"errors"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"google.golang.org/protobuf/protoadapt"

	"github.com/sharedos/toolshare/services/contract/accesscontext"
	"github.com/sharedos/toolshare/services/platform/grpcx"

	"github.com/sharedos/toolshare/catalog-svc/internal/catalog"
	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline"
	"github.com/sharedos/toolshare/catalog-svc/internal/upstream"
)

var _ Coded = (*pipeline.Error)(nil)

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
	// Upstreams (ADR 0019).
	ReasonUpstreamNotFound     = "UPSTREAM_NOT_FOUND"
	ReasonUpstreamExists       = "UPSTREAM_ALREADY_EXISTS"
	ReasonUpstreamInvalid      = "INVALID_UPSTREAM"
	ReasonUpstreamPrecondition = "UPSTREAM_DECISION_MISMATCH"
	// ReasonAcquiredEntry: the entry was acquired from an upstream and
	// changes only through the providers API.
	ReasonAcquiredEntry = "ACQUIRED_FROM_UPSTREAM"
)

// Coded is implemented by domain errors of other packages of this service
// (the pipeline's) that carry their own gRPC code and reason. Error() must
// be safe to show a client.
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
	var fe *pipeline.FieldError
	var coded Coded
	var ue *upstream.ValidationError
	var ce *accesscontext.Error
	switch {
	case errors.As(err, &ce):
		// A context authz-svc would refuse: the caller's, not an outage.
		return InvalidArgument(ce.Field, ce.Rule)
	case errors.As(err, &ue):
		return withDetails(codes.InvalidArgument, ue.Error(), ReasonUpstreamInvalid, map[string]string{"field": ue.Field},
			grpcx.FieldViolation(ue.Field, ue.Detail))
	case errors.Is(err, upstream.ErrNotFound):
		return withDetails(codes.NotFound, err.Error(), ReasonUpstreamNotFound, nil)
	case errors.Is(err, upstream.ErrAlreadyExists):
		return withDetails(codes.AlreadyExists, err.Error(), ReasonUpstreamExists, nil)
	case errors.Is(err, upstream.ErrPrecondition):
		return withDetails(codes.FailedPrecondition, err.Error(), ReasonUpstreamPrecondition, nil)
	case errors.As(err, &ve):
		return withDetails(codes.InvalidArgument, ve.Error(), ReasonInvalidRegistration,
			map[string]string{"field": ve.Field, "rule": ve.Rule},
			&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{
				Field: ve.Field, Description: ve.Rule + ": " + ve.Detail, Reason: ve.Rule,
			}}})
	case errors.As(err, &fe):
		return InvalidArgument(fe.Field, fe.Rule)
	case errors.Is(err, catalog.ErrNotFound):
		return withDetails(codes.NotFound, err.Error(), ReasonToolNotFound, nil)
	case errors.Is(err, catalog.ErrAlreadyExists):
		return withDetails(codes.AlreadyExists, err.Error(), ReasonToolAlreadyExists, nil)
	case errors.Is(err, catalog.ErrRevisionMismatch):
		// Aborted, not FailedPrecondition: the client should re-read and
		// retry the read-modify-write (AIP-154 etag semantics).
		return withDetails(codes.Aborted, err.Error(), ReasonRevisionMismatch, nil)
	case errors.Is(err, catalog.ErrAuthzUnavailable):
		// Fixed text: the cause is an internal address or transport error.
		return withDetails(codes.Unavailable, "authorization service unavailable; no catalogue returned", ReasonAuthzUnavailable, nil)
	case errors.Is(err, catalog.ErrNotReady):
		return withDetails(codes.Unavailable, "catalogue not loaded yet", ReasonCatalogNotReady, nil)
	case errors.As(err, &coded):
		return withDetails(coded.GRPCCode(), coded.Error(), coded.ErrorReason(), nil)
	case errors.Is(err, context.Canceled):
		return withDetails(codes.Canceled, "request cancelled", ReasonCancelled, nil)
	case errors.Is(err, context.DeadlineExceeded):
		return withDetails(codes.DeadlineExceeded, "deadline exceeded", ReasonDeadlineExceeded, nil)
	}
	// A status created by this service's own handlers (e.g. a missing
	// request field) passes through; it is never a wrapped driver error,
	// because only an unwrapped status is accepted.
	if st, ok := err.(interface{ GRPCStatus() *status.Status }); ok {
		return st.GRPCStatus().Err()
	}
	return withDetails(codes.Internal, "internal error", ReasonInternal, nil)
}

// InvalidArgument is a request-shape error (a missing field) as a status.
func InvalidArgument(field, msg string) error {
	return withDetails(codes.InvalidArgument, field+": "+msg, ReasonInvalidArgument, map[string]string{"field": field},
		grpcx.FieldViolation(field, msg))
}

func withDetails(code codes.Code, msg, reason string, md map[string]string, extra ...protoadapt.MessageV1) error {
	return grpcx.Error(code, msg, ErrorDomain, reason, md, extra...)
}
