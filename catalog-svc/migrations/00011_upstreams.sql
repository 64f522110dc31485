-- +goose Up
-- Upstream MCP servers (ADR 0019): key is the namespace; registration holds
-- the provider and the state of its acquired tools (protobuf
-- GetProviderResponse). canonical and digest stay empty: an upstream is not
-- published.
CREATE TABLE catalog.upstreams (
    key          text COLLATE "C" PRIMARY KEY CHECK (char_length(key) BETWEEN 1 AND 128),
    registration bytea NOT NULL,
    canonical    bytea NOT NULL,
    digest       text NOT NULL,
    revision     bigint NOT NULL DEFAULT 1 CHECK (revision > 0),
    updated_at   timestamptz NOT NULL DEFAULT now()
);
GRANT SELECT, INSERT, UPDATE, DELETE ON catalog.upstreams TO sharedos_catalog;

-- +goose Down
REVOKE ALL ON catalog.upstreams FROM sharedos_catalog;
DROP TABLE IF EXISTS catalog.upstreams;
