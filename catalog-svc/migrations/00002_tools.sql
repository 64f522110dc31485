-- +goose Up
-- One row per tool registration. JSON fields are kept twice: the raw bytes
-- (bytea) are what is published, verbatim, because jsonb reorders keys and
-- drops whitespace; the jsonb copy is for operators' queries only.
-- canonical/digest cache the RFC 8785 bytes of the published projection,
-- computed once at write time so that hashing and listing never
-- re-canonicalize. name is COLLATE "C" so ordering and paging follow byte
-- order (the catalogHash sort order) whatever the database locale.
CREATE TABLE catalog.tools (
    name                 text COLLATE "C" PRIMARY KEY
                         CHECK (char_length(name) BETWEEN 1 AND 128 AND name ~ '^[A-Za-z0-9_.-]+$'),
    collision_key        text COLLATE "C" NOT NULL,
    description          text NOT NULL DEFAULT '',
    input_schema         jsonb NOT NULL,
    input_schema_raw     bytea NOT NULL,
    output_schema        jsonb,
    output_schema_raw    bytea,
    annotations          jsonb,
    annotations_raw      bytea,
    namespace            text NOT NULL DEFAULT '',
    source               text NOT NULL DEFAULT '',
    class                smallint NOT NULL CHECK (class BETWEEN 1 AND 3),
    requirement_action   text NOT NULL DEFAULT '',
    requirement_resource text NOT NULL DEFAULT '',
    path_cleaning        smallint NOT NULL DEFAULT 0,
    handler_target       text NOT NULL DEFAULT '',
    handler_timeout_ns   bigint,
    credential_ref       text NOT NULL DEFAULT '',
    canonical            bytea NOT NULL,
    digest               text NOT NULL,
    revision             bigint NOT NULL DEFAULT 1 CHECK (revision > 0),
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now()
);

-- The uniqueness rules of registration, enforced here so that two
-- concurrent registrations cannot both pass a check made in Go.
-- collision_key is lower(CollisionKey(name)) ('.' and '-' → '_', then
-- case-folded): files.read / files_read / Files_Read would look alike to a
-- harness that rewrites separators or folds case. The lower(name) index is
-- implied by it and kept so a case-only clash is reported by name.
CREATE UNIQUE INDEX tools_collision_key_key ON catalog.tools (collision_key);
CREATE UNIQUE INDEX tools_name_lower_key ON catalog.tools (lower(name));

-- +goose Down
DROP TABLE IF EXISTS catalog.tools;
