-- +goose Up
-- The run's SystemIdentity on every operation record (ADR 0014, issue 21):
-- besides catalog_hash and harness (the harness's name), its version, how
-- it speaks MCP (native or through an extension, and which), the model the
-- host declared and the ToolPolicy's digest. Taken from the turn's grant
-- when the row is written, never updated (the service role has no UPDATE
-- on them, as for kind). Rows written before carry ''.
ALTER TABLE catalog.operations
    ADD COLUMN harness_version text NOT NULL DEFAULT '',
    ADD COLUMN mcp_support text NOT NULL DEFAULT ''
        CONSTRAINT operations_mcp_support_check CHECK (mcp_support IN ('', 'native', 'extension')),
    ADD COLUMN extension text NOT NULL DEFAULT '',
    ADD COLUMN declared_model text NOT NULL DEFAULT '',
    ADD COLUMN tool_policy_digest text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE catalog.operations
    DROP COLUMN IF EXISTS tool_policy_digest,
    DROP COLUMN IF EXISTS declared_model,
    DROP COLUMN IF EXISTS extension,
    DROP COLUMN IF EXISTS mcp_support,
    DROP COLUMN IF EXISTS harness_version;
