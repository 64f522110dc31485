-- +goose Up
CREATE SCHEMA IF NOT EXISTS bridge;

-- One row per turn lease. The token is never stored, only its SHA-256.
-- context/policy/harness are protojson (readable in psql); catalogue is the
-- pinned snapshot as a binary sharedos.v1.ListToolsResponse (tools with their
-- canonical_json, and the catalog hash), read back verbatim by any pod.
CREATE TABLE bridge.leases (
    turn_id        text        PRIMARY KEY,
    token_sha256   bytea       NOT NULL CHECK (octet_length(token_sha256) = 32),
    context        jsonb       NOT NULL,
    policy         jsonb       NOT NULL,
    harness        jsonb       NOT NULL,
    declared_model text        NOT NULL,
    catalog_hash   text        NOT NULL,
    catalogue      bytea       NOT NULL,
    portable_names boolean     NOT NULL DEFAULT false,
    opened_at      timestamptz NOT NULL,
    expires_at     timestamptz NOT NULL,
    closed_at      timestamptz,
    CHECK (expires_at > opened_at)
);

-- A token belongs to one turn; the index also answers "whose token is this"
-- (another turn's token on this turn is a 404, not a 401).
CREATE UNIQUE INDEX leases_token_sha256_idx ON bridge.leases (token_sha256);

-- Finding leases to purge (closed or expired long ago) without a scan.
CREATE INDEX leases_expires_at_idx ON bridge.leases (expires_at);

-- +goose Down
DROP TABLE bridge.leases;
DROP SCHEMA bridge;
