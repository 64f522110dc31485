package pipeline

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"google.golang.org/grpc/codes"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"

	"github.com/sharedos/toolshare/catalog-svc/internal/pipeline/records"
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

// Export page sizes.
const (
	DefaultExportPage = 1000
	MaxExportPage     = 5000
)

// ErrExportMismatch: RecordExport found the range no longer holds exactly
// the exported records.
var ErrExportMismatch = &Error{codes.FailedPrecondition, "EXPORT_MISMATCH",
	"the range does not hold exactly the exported records (one still pending, or one written into it since it was read): export again"}

// ExportOperations returns a page of finished records in sequence order; a
// page ends before the first pending record.
func (s *Pipeline) ExportOperations(ctx context.Context, req *sharedosv1.ExportOperationsRequest) (*sharedosv1.ExportOperationsResponse, error) {
	size := int(req.GetPageSize())
	switch {
	case size == 0:
		size = DefaultExportPage
	case size < 0 || size > MaxExportPage:
		return nil, invalid("page_size", "must be between 1 and 5000")
	}
	if req.GetAfterSequence() < 0 {
		return nil, invalid("after_sequence", "must not be negative")
	}
	var since time.Time
	if req.GetSince() != nil {
		if err := req.GetSince().CheckValid(); err != nil {
			return nil, invalid("since", "must be a valid timestamp")
		}
		since = req.GetSince().AsTime()
	}
	from, rows, err := s.records.ExportPage(ctx, since, req.GetAfterSequence(), size)
	if err != nil {
		s.logger.ErrorContext(ctx, "export operations", slog.Any("error", err))
		return nil, ErrRecordsUnreadable
	}
	out := &sharedosv1.ExportOperationsResponse{FromSequence: from, NextAfterSequence: from, Done: len(rows) < size}
	for i := range rows {
		if rows[i].Status == sharedosv1.OperationStatus_OPERATION_STATUS_PENDING {
			out.Done = true
			break
		}
		out.Operations = append(out.Operations, rows[i].ToProto())
		out.NextAfterSequence = rows[i].Sequence
	}
	return out, nil
}

// RecordExport notes an archive of records in the export ledger.
func (s *Pipeline) RecordExport(ctx context.Context, req *sharedosv1.RecordExportRequest) (*sharedosv1.RecordExportResponse, error) {
	e := records.Export{After: req.GetAfterSequence(), Through: req.GetThroughSequence(), Rows: req.GetRows(), SHA256: req.GetSha256(),
		RecordsDigest: req.GetRecordsDigest()}
	switch {
	case e.After < 0:
		return nil, invalid("after_sequence", "must not be negative")
	case e.Through < e.After:
		return nil, invalid("through_sequence", "must not be below after_sequence")
	case e.Rows < 0 || e.Rows > e.Through-e.After:
		return nil, invalid("rows", "must be between 0 and through_sequence - after_sequence")
	case !isHexSHA256(e.SHA256):
		return nil, invalid("sha256", "must be 64 lowercase hex digits")
	case !isHexSHA256(e.RecordsDigest):
		return nil, invalid("records_digest", "must be 64 lowercase hex digits: the digest of the archived records' sequences (an older sharedosctl sends none)")
	}
	id, err := s.records.RecordExport(ctx, e)
	switch {
	case errors.Is(err, records.ErrExportMismatch):
		return nil, ErrExportMismatch
	case err != nil:
		s.logger.ErrorContext(ctx, "record export", slog.Any("error", err))
		return nil, ErrRecordsUnreadable
	}
	s.logger.InfoContext(ctx, "operation records exported", slog.Int64("export_id", id),
		slog.Int64("after_sequence", e.After), slog.Int64("through_sequence", e.Through), slog.Int64("rows", e.Rows))
	return &sharedosv1.RecordExportResponse{ExportId: id}, nil
}

func isHexSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
