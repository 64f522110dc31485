-- +goose Up
-- 2025-era sessions a client ended with DELETE (ADR 0005, amended): every
-- pod reads them with the lease's status and answers them 404 from then on.
-- Bounded per lease (leases.MaxTerminatedSessions).
ALTER TABLE bridge.leases ADD COLUMN terminated_sessions text[] NOT NULL DEFAULT '{}';

-- +goose Down
ALTER TABLE bridge.leases DROP COLUMN terminated_sessions;
