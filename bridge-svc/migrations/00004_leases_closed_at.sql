-- +goose Up
-- The retention purge (--lease-retention) deletes leases closed or expired
-- before a cutoff; with leases_expires_at_idx this finds them without a scan.
-- Partial: only closed leases are indexed.
CREATE INDEX leases_closed_at_idx ON bridge.leases (closed_at) WHERE closed_at IS NOT NULL;

-- +goose Down
DROP INDEX bridge.leases_closed_at_idx;
