// Package server implements sharedos.v1.AuthzService over a pdp decider.
//
// A deny is a response field. A gRPC error means no decision was made:
// InvalidArgument for a request that was refused before evaluation (the
// message names the field and the rule), Internal with ErrorInfo reason
// AUTHZ_EVAL_ERROR for an evaluation error, DeadlineExceeded with the same
// reason when the evaluation ran out of time. The kernel records the errors
// as failed/authz_error (on that reason whatever the code); none of them is
// ever turned into an allow or a deny.
package server
