package grpcx

import (
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
)

// Error is the one way every service builds a gRPC status error: code and
// message, a google.rpc.ErrorInfo (domain, reason, metadata) and any extra
// details. Details only fail to marshal on programmer error; the code and
// message still carry the meaning then.
func Error(code codes.Code, msg, domain, reason string, md map[string]string, extra ...protoadapt.MessageV1) error {
	st := status.New(code, msg)
	details := append([]protoadapt.MessageV1{&errdetails.ErrorInfo{Reason: reason, Domain: domain, Metadata: md}}, extra...)
	if withD, err := st.WithDetails(details...); err == nil {
		return withD.Err()
	}
	return st.Err()
}

// ErrorReason is the google.rpc.ErrorInfo of err's status: its domain and
// reason, both empty when it has none.
func ErrorReason(err error) (domain, reason string) {
	st, _ := status.FromError(err)
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.GetDomain(), info.GetReason()
		}
	}
	return "", ""
}

// FieldViolation is the google.rpc.BadRequest detail naming a bad field and
// the rule it broke.
func FieldViolation(field, rule string) *errdetails.BadRequest {
	return &errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: field, Description: rule}}}
}
