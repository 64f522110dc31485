-- +goose Up
-- Completions as heap-only (HOT) updates (ADR 0027, issue 20 P1e). The two
-- "WHERE status = 'pending'" partial indexes named the column every
-- completion changes, so PostgreSQL wrote each completed row anew into every
-- index of catalog.operations. They go. The reconciler finds stale pending
-- rows from a watermark over operations_started instead: every row still
-- pending (or still to commit) started at or after `through`. A reconcile
-- moves it up to the oldest row it leaves pending, or to its cutoff (the
-- longest call plus a margin ago: a pending row's insert commits within
-- that of its start).
CREATE TABLE catalog.reconcile_watermark (
    one     boolean     PRIMARY KEY DEFAULT true CONSTRAINT reconcile_watermark_one CHECK (one),
    through timestamptz NOT NULL
);
-- The oldest pending row today, found with the index about to go; an hour
-- back when that is later (calls last at most 15 minutes and their
-- authorization).
INSERT INTO catalog.reconcile_watermark (through)
SELECT LEAST(COALESCE(min(started_at), now()), now() - interval '1 hour')
  FROM catalog.operations WHERE status = 'pending';
DROP INDEX catalog.operations_pending;
DROP INDEX catalog.operations_turn_pending;
-- Room on each page for the completed version of its rows (pages written
-- from now on).
ALTER TABLE catalog.operations SET (fillfactor = 80);
GRANT SELECT, UPDATE (through) ON catalog.reconcile_watermark TO sharedos_catalog;

-- +goose Down
REVOKE ALL ON catalog.reconcile_watermark FROM sharedos_catalog;
ALTER TABLE catalog.operations RESET (fillfactor);
CREATE INDEX operations_turn_pending ON catalog.operations (turn_id) WHERE status = 'pending';
CREATE INDEX operations_pending ON catalog.operations (started_at) WHERE status = 'pending';
DROP TABLE catalog.reconcile_watermark;
