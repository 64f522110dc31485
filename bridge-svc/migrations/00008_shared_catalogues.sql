-- +goose Up
-- A turn's pinned catalogue is stored once per distinct content, not once
-- per lease (ADR 0026): the turns of one context pin the same tools, and at
-- 50 tools the copy was ≈ 30 KB per lease and most of OpenTurn's INSERT.
-- sha256 is the SHA-256 of the encoded sharedos.v1.LeaseCatalogue. A lease
-- names its catalogue by that digest (the foreign key keeps a catalogue
-- while any lease names it); leases stored before this migration keep
-- theirs inline in leases.catalogue. The retention purge deletes catalogues
-- no lease names.
CREATE TABLE bridge.catalogues (
    sha256    bytea PRIMARY KEY CHECK (octet_length(sha256) = 32),
    catalogue bytea NOT NULL
);
ALTER TABLE bridge.leases ALTER COLUMN catalogue DROP NOT NULL;
ALTER TABLE bridge.leases ADD COLUMN catalogue_sha256 bytea REFERENCES bridge.catalogues (sha256);
ALTER TABLE bridge.leases ADD CONSTRAINT leases_one_catalogue
    CHECK ((catalogue IS NULL) <> (catalogue_sha256 IS NULL));
-- The purge's "no lease names it" and the foreign key's check on delete.
CREATE INDEX leases_catalogue_sha256_idx ON bridge.leases (catalogue_sha256);
GRANT SELECT, INSERT, DELETE ON bridge.catalogues TO sharedos_bridge;

-- +goose Down
UPDATE bridge.leases l SET catalogue = c.catalogue, catalogue_sha256 = NULL
  FROM bridge.catalogues c WHERE c.sha256 = l.catalogue_sha256;
ALTER TABLE bridge.leases DROP CONSTRAINT leases_one_catalogue;
ALTER TABLE bridge.leases DROP COLUMN catalogue_sha256;
ALTER TABLE bridge.leases ALTER COLUMN catalogue SET NOT NULL;
REVOKE ALL ON bridge.catalogues FROM sharedos_bridge;
DROP TABLE bridge.catalogues;
