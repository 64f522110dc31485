-- +goose Up
-- What each attempt is (ADR 0018): a tools/call, a prompts/get or a
-- resources/read. Set when the row is written, never updated (the service
-- role has no UPDATE on it); requested_tool holds the tool's or prompt's
-- name, or the resource's URI.
ALTER TABLE catalog.operations ADD COLUMN kind text NOT NULL DEFAULT 'tool'
    CONSTRAINT operations_kind_check CHECK (kind IN ('tool', 'prompt', 'resource'));

-- +goose Down
ALTER TABLE catalog.operations DROP COLUMN kind;
