-- +goose Up
-- Prompt and resource registrations (ADR 0018): like tools, the admin view
-- (protobuf) with the RFC 8785 bytes of the published projection and their
-- SHA-256, computed once at write time. key is the prompt's name or the
-- resource's URI (or URI template), COLLATE "C" so listing follows byte order.
CREATE TABLE catalog.prompts (
    key          text COLLATE "C" PRIMARY KEY CHECK (char_length(key) BETWEEN 1 AND 128),
    registration bytea NOT NULL,
    canonical    bytea NOT NULL,
    digest       text NOT NULL,
    revision     bigint NOT NULL DEFAULT 1 CHECK (revision > 0),
    updated_at   timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE catalog.resources (
    key          text COLLATE "C" PRIMARY KEY CHECK (char_length(key) BETWEEN 1 AND 2048),
    registration bytea NOT NULL,
    canonical    bytea NOT NULL,
    digest       text NOT NULL,
    revision     bigint NOT NULL DEFAULT 1 CHECK (revision > 0),
    updated_at   timestamptz NOT NULL DEFAULT now()
);
GRANT SELECT, INSERT, UPDATE, DELETE ON catalog.prompts, catalog.resources TO sharedos_catalog;

-- +goose Down
REVOKE ALL ON catalog.prompts, catalog.resources FROM sharedos_catalog;
DROP TABLE IF EXISTS catalog.resources;
DROP TABLE IF EXISTS catalog.prompts;
