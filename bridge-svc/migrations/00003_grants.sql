-- +goose Up
-- The kernel's signed turn grant (ADR 0015), sent with every call of the
-- turn: the kernel takes the turn's context and pin from it alone. A lease
-- opened before this migration has none, and its calls are refused
-- invalid_grant: open a new turn.
ALTER TABLE bridge.leases ADD COLUMN grant_token text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE bridge.leases DROP COLUMN grant_token;
