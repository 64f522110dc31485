package pipeline

import (
	"context"
	"log/slog"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
)

// ListOperations returns a turn's records in the order written.
func (s *Pipeline) ListOperations(ctx context.Context, req *sharedosv1.ListOperationsRequest) (*sharedosv1.ListOperationsResponse, error) {
	if req.GetTurnId() == "" {
		return nil, invalid("turn_id", "is required")
	}
	rows, err := s.records.ListOperations(ctx, req.GetTurnId())
	if err != nil {
		s.logger.ErrorContext(ctx, "list operations", slog.Any("error", err))
		return nil, ErrRecordsUnreadable
	}
	out := &sharedosv1.ListOperationsResponse{Operations: make([]*sharedosv1.OperationRecord, 0, len(rows))}
	for i := range rows {
		out.Operations = append(out.Operations, rows[i].ToProto())
	}
	return out, nil
}
