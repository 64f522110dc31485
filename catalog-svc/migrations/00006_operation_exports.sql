-- +goose Up
-- Retention of operation records (docs/retention.md). Records stay
-- append-only; an operator archives them (`sharedosctl ops export`), the
-- archive is noted here (RuntimeService.RecordExport, which checks that the
-- range holds exactly the archived rows and none pending), and only the
-- owner's catalog.purge_exported_operations ever deletes records: those of
-- a noted archive, once it still matches the table, finished before a
-- cutoff. No statement can delete a record outside a noted archive.
CREATE TABLE catalog.operation_exports (
    id               bigserial   PRIMARY KEY,
    after_sequence   bigint      NOT NULL,
    through_sequence bigint      NOT NULL,
    rows             bigint      NOT NULL,
    sha256           text        NOT NULL,
    recorded_at      timestamptz NOT NULL DEFAULT now(),
    purged_at        timestamptz,
    CONSTRAINT operation_exports_range CHECK (after_sequence >= 0 AND through_sequence >= after_sequence AND rows >= 0),
    CONSTRAINT operation_exports_sha256 CHECK (sha256 ~ '^[0-9a-f]{64}$')
);

CREATE INDEX operations_started ON catalog.operations (started_at);

GRANT SELECT, INSERT ON catalog.operation_exports TO sharedos_catalog;
GRANT USAGE ON SEQUENCE catalog.operation_exports_id_seq TO sharedos_catalog;

-- The append-only guard, now with one way to delete: a row inside the
-- export the purge function is purging (sharedos.purging_export, set only
-- for the purge's own transaction). TRUNCATE is always refused.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION catalog.operations_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    purging text := current_setting('sharedos.purging_export', true);
BEGIN
    IF TG_OP = 'DELETE' THEN
        IF purging IS NOT NULL AND purging <> '' AND OLD.status <> 'pending' AND EXISTS (
               SELECT 1 FROM catalog.operation_exports e
                WHERE e.id = purging::bigint AND e.purged_at IS NULL
                  AND OLD.sequence > e.after_sequence AND OLD.sequence <= e.through_sequence) THEN
            RETURN OLD;
        END IF;
        RAISE EXCEPTION 'catalog.operations is append-only: DELETE refused outside an exported range'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF TG_OP = 'TRUNCATE' THEN
        RAISE EXCEPTION 'catalog.operations is append-only: % refused', TG_OP
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF OLD.status <> 'pending' THEN
        RAISE EXCEPTION 'catalog.operations: row % is % and can no longer change', OLD.attempt_id, OLD.status
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF NEW.sequence <> OLD.sequence OR NEW.attempt_id <> OLD.attempt_id OR NEW.call_id <> OLD.call_id
       OR NEW.turn_id <> OLD.turn_id OR NEW.duplicate <> OLD.duplicate OR NEW.principal <> OLD.principal
       OR NEW.requested_tool <> OLD.requested_tool OR NEW.requested_tool_sha256 <> OLD.requested_tool_sha256
       OR NEW.catalog_hash <> OLD.catalog_hash OR NEW.arguments_digest <> OLD.arguments_digest
       OR NEW.instance_id <> OLD.instance_id OR NEW.harness <> OLD.harness OR NEW.trace_id <> OLD.trace_id
       OR NEW.started_at <> OLD.started_at THEN
        RAISE EXCEPTION 'catalog.operations: only the outcome of a pending row may be written'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

-- catalog.purge_exported_operations deletes the records of every noted,
-- not yet purged export whose range still holds exactly its rows (none
-- pending, none committed into it since) and whose records all finished
-- before finished_before. An export that no longer matches is skipped (a
-- NOTICE says which): export again. Returns the number of records deleted.
-- Only the owner may run it; the service role may not.
-- +goose StatementBegin
CREATE FUNCTION catalog.purge_exported_operations(finished_before timestamptz) RETURNS bigint
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

-- +goose Down
DROP FUNCTION IF EXISTS catalog.purge_exported_operations(timestamptz);
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION catalog.operations_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' OR TG_OP = 'TRUNCATE' THEN
        RAISE EXCEPTION 'catalog.operations is append-only: % refused', TG_OP
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF OLD.status <> 'pending' THEN
        RAISE EXCEPTION 'catalog.operations: row % is % and can no longer change', OLD.attempt_id, OLD.status
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF NEW.sequence <> OLD.sequence OR NEW.attempt_id <> OLD.attempt_id OR NEW.call_id <> OLD.call_id
       OR NEW.turn_id <> OLD.turn_id OR NEW.duplicate <> OLD.duplicate OR NEW.principal <> OLD.principal
       OR NEW.requested_tool <> OLD.requested_tool OR NEW.requested_tool_sha256 <> OLD.requested_tool_sha256
       OR NEW.catalog_hash <> OLD.catalog_hash OR NEW.arguments_digest <> OLD.arguments_digest
       OR NEW.instance_id <> OLD.instance_id OR NEW.harness <> OLD.harness OR NEW.trace_id <> OLD.trace_id
       OR NEW.started_at <> OLD.started_at THEN
        RAISE EXCEPTION 'catalog.operations: only the outcome of a pending row may be written'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
DROP INDEX IF EXISTS catalog.operations_started;
REVOKE ALL ON SEQUENCE catalog.operation_exports_id_seq FROM sharedos_catalog;
REVOKE ALL ON catalog.operation_exports FROM sharedos_catalog;
DROP TABLE IF EXISTS catalog.operation_exports;
