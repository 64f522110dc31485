package server

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"

	"github.com/sharedos/toolshare/services/contract/outcome"
	"github.com/sharedos/toolshare/services/platform/grpcx"

	"github.com/sharedos/toolshare/authz-svc/internal/pdp"
)

// ErrorDomain is the google.rpc.ErrorInfo domain of every error this
// service returns (outcome owns it: the kernel reads it).
const ErrorDomain = outcome.ErrorDomainAuthz

// ErrorInfo reasons. ReasonEvalError is the kernel's authz_error, so
// outcome owns it.
const (
	ReasonInvalidArgument = "AUTHZ_INVALID_ARGUMENT"
	ReasonEvalError       = outcome.ReasonAuthzEvalError
)

// fieldError is a request refused before evaluation.
type fieldError struct {
	Field string
	Rule  string
}

func (e *fieldError) Error() string { return e.Field + ": " + e.Rule }

func invalid(field, format string, args ...any) error {
	return &fieldError{Field: field, Rule: fmt.Sprintf(format, args...)}
}

// toStatus is the one mapping from domain errors to gRPC status. Evaluation
// error text (which may quote policy internals or argument values) stays in
// the decision log; the caller gets a fixed message plus the decision id.
func toStatus(err error, decisionID, revision string) error {
	if err == nil {
		return nil
	}
	var fe *fieldError
	if errors.As(err, &fe) {
		return grpcx.Error(codes.InvalidArgument, fe.Error(), ErrorDomain, ReasonInvalidArgument,
			map[string]string{"field": fe.Field}, grpcx.FieldViolation(fe.Field, fe.Rule))
	}
	md := map[string]string{"decision_id": decisionID, "policy_revision": revision}
	var ee *pdp.EvalError
	code, msg := codes.Internal, "internal error; no decision was made"
	if errors.As(err, &ee) {
		code, msg = codes.Internal, "policy evaluation failed; no decision was made"
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			code, msg = codes.DeadlineExceeded, "policy evaluation timed out; no decision was made"
		case errors.Is(err, context.Canceled):
			code, msg = codes.Canceled, "request cancelled during policy evaluation; no decision was made"
		}
	}
	return grpcx.Error(code, msg, ErrorDomain, ReasonEvalError, md)
}
