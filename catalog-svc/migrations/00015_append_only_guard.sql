-- +goose Up
-- The append-only guard of catalog.operations also holds for the columns
-- added since it was written: kind (00010) and the run's system identity
-- (00013). The service role has no UPDATE on them; now the database owner
-- cannot rewrite them on a pending row either (records are append-only
-- even for the owner: who ran what is never rewritten). The outcome columns,
-- which an UPDATE of a pending row may write, are resolved_tool,
-- decision_id, policy_revision, status, code, reason, finished_at,
-- progress_count, input_rounds, waiting_until, resumed_at and resumed_by;
-- every other column is the record's and never changes. (A WHEN condition
-- on the trigger, so that a completion would not call PL/pgSQL, was
-- measured and not taken: PostgreSQL prepares it again for every UPDATE
-- statement: 20,000 single-row completions took 0.89–0.95 s with it, against
-- 0.56–0.60 s with this function, 0.56–0.59 s with the one before and
-- 0.50–0.52 s with no trigger.)
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
       OR NEW.started_at <> OLD.started_at OR NEW.kind <> OLD.kind
       OR NEW.harness_version <> OLD.harness_version OR NEW.mcp_support <> OLD.mcp_support
       OR NEW.extension <> OLD.extension OR NEW.declared_model <> OLD.declared_model
       OR NEW.tool_policy_digest <> OLD.tool_policy_digest THEN
        RAISE EXCEPTION 'catalog.operations: only the outcome of a pending row may be written'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

-- +goose Down
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
