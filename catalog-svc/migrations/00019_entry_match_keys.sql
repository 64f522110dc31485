-- +goose Up
-- A resources/read through a template is refused when a concrete resource
-- is registered on its own that a reader may take the URI for: compared by
-- a key (services/contract/resourceuri Key) that the catalogue computes at
-- write time. An entry written without one (before this migration, or by
-- a catalog-svc that predates it during a rolling upgrade) has NULL: the
-- lookup returns those too and the catalogue computes their keys itself;
-- catalog-svc fills them in when it starts.
ALTER TABLE catalog.prompts ADD COLUMN match_key text COLLATE "C";
ALTER TABLE catalog.resources ADD COLUMN match_key text COLLATE "C";
ALTER TABLE catalog.upstreams ADD COLUMN match_key text COLLATE "C";
CREATE INDEX resources_match_key ON catalog.resources (match_key);

-- +goose Down
DROP INDEX IF EXISTS catalog.resources_match_key;
ALTER TABLE catalog.upstreams DROP COLUMN IF EXISTS match_key;
ALTER TABLE catalog.resources DROP COLUMN IF EXISTS match_key;
ALTER TABLE catalog.prompts DROP COLUMN IF EXISTS match_key;
