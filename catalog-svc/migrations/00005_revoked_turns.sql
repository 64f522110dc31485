-- +goose Up
-- Turn revocations (ADR 0015): CloseTurn voids the turn's grant on every
-- kernel. A kernel reads this table after a call's pending row is written
-- and before its handler starts, and the revoking kernel waits for the
-- turn's pending rows to end, so no handler of a closed turn starts after
-- CloseTurn returns. A row is kept until no grant it voids can still be
-- valid (grants live at most 24 hours).
CREATE TABLE catalog.revoked_turns (
    turn_id    text        PRIMARY KEY,
    revoked_at timestamptz NOT NULL DEFAULT now(),
    until      timestamptz NOT NULL
);
CREATE INDEX revoked_turns_until ON catalog.revoked_turns (until);
CREATE INDEX operations_turn_pending ON catalog.operations (turn_id) WHERE status = 'pending';

GRANT SELECT, INSERT, DELETE ON catalog.revoked_turns TO sharedos_catalog;
GRANT UPDATE (until) ON catalog.revoked_turns TO sharedos_catalog;

-- +goose Down
REVOKE ALL ON catalog.revoked_turns FROM sharedos_catalog;
DROP INDEX catalog.operations_turn_pending;
DROP TABLE catalog.revoked_turns;
