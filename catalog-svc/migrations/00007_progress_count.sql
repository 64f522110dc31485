-- +goose Up
-- Progress (the MCP surface): a record keeps how many progress reports the
-- kernel passed on for the call, never their texts. It is an outcome
-- column: written with the completion of a pending row, like the others.
ALTER TABLE catalog.operations ADD COLUMN progress_count integer NOT NULL DEFAULT 0
    CONSTRAINT operations_progress_count_check CHECK (progress_count >= 0);
GRANT UPDATE (progress_count) ON catalog.operations TO sharedos_catalog;

-- +goose Down
REVOKE UPDATE (progress_count) ON catalog.operations FROM sharedos_catalog;
ALTER TABLE catalog.operations DROP COLUMN progress_count;
