-- +goose Up
-- Two authority fields of a registration that were not kept: the
-- requirement's open_arguments, and read_only, the operator's confirmation
-- of a tool's concurrency class (ADR 0019).
ALTER TABLE catalog.tools
    ADD COLUMN requirement_open_arguments boolean NOT NULL DEFAULT false,
    ADD COLUMN read_only boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE catalog.tools DROP COLUMN IF EXISTS read_only, DROP COLUMN IF EXISTS requirement_open_arguments;
