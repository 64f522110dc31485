-- +goose Up
-- An export names the set of records it archives, not only their number
-- (services/contract/exportset): SHA-256 over "<sequence>\n" per record,
-- in sequence order. A record whose sequence was taken before
-- its range was exported and that committed after (a group-commit batch in
-- flight) is in no archive; a count could come back to the archived one
-- (another export's purge deleting a row of the range) and the purge then
-- deleted it. RecordExport notes an export only when the range holds
-- exactly the named set, and the purge deletes exactly the set it checked,
-- in one snapshot: a row that commits while it runs is never deleted.
-- Exports noted before this carry no set and are never purged: export
-- again (docs/retention.md).
ALTER TABLE catalog.operation_exports ADD COLUMN records_digest text
    CONSTRAINT operation_exports_records_digest CHECK (records_digest ~ '^[0-9a-f]{64}$');

-- +goose StatementBegin
CREATE FUNCTION catalog.operations_set_digest(after_sequence bigint, through_sequence bigint) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT encode(sha256(convert_to(coalesce(
               string_agg(o.sequence::text || E'\n', '' ORDER BY o.sequence), ''), 'UTF8')), 'hex')
      FROM catalog.operations o
     WHERE o.sequence > after_sequence AND o.sequence <= through_sequence
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION catalog.purge_exported_operations(finished_before timestamptz) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    e        record;
    seqs     bigint[];
    digest   text;
    pending  bigint;
    latest   timestamptz;
    deleted  bigint;
    total    bigint := 0;
BEGIN
    FOR e IN SELECT * FROM catalog.operation_exports WHERE purged_at IS NULL ORDER BY id FOR UPDATE LOOP
        IF e.records_digest IS NULL THEN
            RAISE NOTICE 'export % (sequences % to %) names no record set (noted before migration 00018): skipped; export again',
                e.id, e.after_sequence + 1, e.through_sequence;
            CONTINUE;
        END IF;
        -- One snapshot (a STABLE function sees its calling statement's):
        -- the set checked is the set deleted.
        SELECT array_agg(o.sequence ORDER BY o.sequence),
               catalog.operations_set_digest(e.after_sequence, e.through_sequence),
               count(*) FILTER (WHERE o.status = 'pending'), max(o.finished_at)
          INTO seqs, digest, pending, latest
          FROM catalog.operations o WHERE o.sequence > e.after_sequence AND o.sequence <= e.through_sequence;
        IF pending <> 0 OR digest <> e.records_digest OR coalesce(cardinality(seqs), 0) <> e.rows THEN
            RAISE NOTICE 'export % (sequences % to %) no longer matches the table (% records, % pending, % archived, or not the archived ones): skipped; export again',
                e.id, e.after_sequence + 1, e.through_sequence, coalesce(cardinality(seqs), 0), pending, e.rows;
            CONTINUE;
        END IF;
        IF latest IS NOT NULL AND latest >= finished_before THEN
            CONTINUE;
        END IF;
        PERFORM set_config('sharedos.purging_export', e.id::text, true);
        DELETE FROM catalog.operations WHERE sequence = ANY (seqs)
           AND sequence > e.after_sequence AND sequence <= e.through_sequence;
        GET DIAGNOSTICS deleted = ROW_COUNT;
        PERFORM set_config('sharedos.purging_export', '', true);
        UPDATE catalog.operation_exports SET purged_at = now() WHERE id = e.id;
        total := total + deleted;
    END LOOP;
    RETURN total;
END
$$;
-- +goose StatementEnd
REVOKE EXECUTE ON FUNCTION catalog.purge_exported_operations(timestamptz) FROM PUBLIC;

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION catalog.purge_exported_operations(finished_before timestamptz) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    e        record;
    finished bigint;
    pending  bigint;
    latest   timestamptz;
    deleted  bigint;
    total    bigint := 0;
BEGIN
    FOR e IN SELECT * FROM catalog.operation_exports WHERE purged_at IS NULL ORDER BY id FOR UPDATE LOOP
        SELECT count(*) FILTER (WHERE status <> 'pending'), count(*) FILTER (WHERE status = 'pending'), max(finished_at)
          INTO finished, pending, latest
          FROM catalog.operations WHERE sequence > e.after_sequence AND sequence <= e.through_sequence;
        IF pending <> 0 OR finished <> e.rows THEN
            RAISE NOTICE 'export % (sequences % to %) no longer matches the table (% finished, % pending, % archived): skipped; export again',
                e.id, e.after_sequence + 1, e.through_sequence, finished, pending, e.rows;
            CONTINUE;
        END IF;
        IF latest IS NOT NULL AND latest >= finished_before THEN
            CONTINUE;
        END IF;
        PERFORM set_config('sharedos.purging_export', e.id::text, true);
        DELETE FROM catalog.operations WHERE sequence > e.after_sequence AND sequence <= e.through_sequence;
        GET DIAGNOSTICS deleted = ROW_COUNT;
        PERFORM set_config('sharedos.purging_export', '', true);
        UPDATE catalog.operation_exports SET purged_at = now() WHERE id = e.id;
        total := total + deleted;
    END LOOP;
    RETURN total;
END
$$;
-- +goose StatementEnd
REVOKE EXECUTE ON FUNCTION catalog.purge_exported_operations(timestamptz) FROM PUBLIC;
DROP FUNCTION IF EXISTS catalog.operations_set_digest(bigint, bigint);
ALTER TABLE catalog.operation_exports DROP COLUMN IF EXISTS records_digest;
