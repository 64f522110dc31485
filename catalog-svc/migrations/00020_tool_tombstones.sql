-- +goose Up
-- A tool's revisions never repeat under its name, across deletion too: an
-- update prepared against a deleted tool (expected_revision N) must not
-- apply to another registered later under the same name that has reached
-- N again. Delete writes the last revision here in its transaction; a
-- Create or CreateBatch of the name starts at last_revision + 1 (and
-- consumes the row) in its own. A never-seen name still starts at 1. The
-- row is in the database, so every replica honours it. A tool deleted
-- before this migration (or by a catalog-svc that predates it, during a
-- rolling upgrade) left none and starts again at 1.
CREATE TABLE catalog.tool_tombstones (
    name          text COLLATE "C" PRIMARY KEY,
    last_revision bigint NOT NULL CHECK (last_revision > 0)
);
GRANT SELECT, INSERT, UPDATE, DELETE ON catalog.tool_tombstones TO sharedos_catalog;

-- +goose Down
REVOKE ALL ON catalog.tool_tombstones FROM sharedos_catalog;
DROP TABLE IF EXISTS catalog.tool_tombstones;
