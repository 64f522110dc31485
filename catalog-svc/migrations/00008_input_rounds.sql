-- +goose Up
-- Input rounds (MCP input-required results, ADR 0017): an attempt whose tool
-- asked the client for input stays one pending row while it waits
-- (waiting_until set) and goes on as the same row when the client answers
-- (resumed_at/resumed_by: the kernel that took it on, which is whose crash
-- interrupts it now). A row that waits is never reconciled as interrupted:
-- it ends failed/timeout when its wait runs out, or cancelled when its turn
-- closes. input_rounds counts the times it asked.
ALTER TABLE catalog.operations
    ADD COLUMN input_rounds integer NOT NULL DEFAULT 0
        CONSTRAINT operations_input_rounds_check CHECK (input_rounds >= 0),
    ADD COLUMN waiting_until timestamptz,
    ADD COLUMN resumed_at timestamptz,
    ADD COLUMN resumed_by text NOT NULL DEFAULT '',
    ADD CONSTRAINT operations_waiting_check CHECK (waiting_until IS NULL OR status = 'pending');
CREATE INDEX operations_waiting ON catalog.operations (waiting_until) WHERE waiting_until IS NOT NULL;
GRANT UPDATE (input_rounds, waiting_until, resumed_at, resumed_by) ON catalog.operations TO sharedos_catalog;

-- +goose Down
REVOKE UPDATE (input_rounds, waiting_until, resumed_at, resumed_by) ON catalog.operations FROM sharedos_catalog;
DROP INDEX IF EXISTS catalog.operations_waiting;
ALTER TABLE catalog.operations
    DROP CONSTRAINT operations_waiting_check,
    DROP COLUMN resumed_by,
    DROP COLUMN resumed_at,
    DROP COLUMN waiting_until,
    DROP COLUMN input_rounds;
