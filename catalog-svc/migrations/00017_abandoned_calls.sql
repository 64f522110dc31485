-- +goose Up
-- Marks the record of a call its bridge gave up on while sending it
-- (ToolCall.abandoned, ADR 0028): written only when the turn had no row for
-- the call id, and the reason the call itself, should it arrive after all,
-- is not recorded again (one attempt, one record). Part of the record: the
-- append-only guard compares it, and the service role has no UPDATE on it.
ALTER TABLE catalog.operations ADD COLUMN abandoned boolean NOT NULL DEFAULT false;

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
       OR NEW.tool_policy_digest <> OLD.tool_policy_digest OR NEW.tenant <> OLD.tenant
       OR NEW.abandoned <> OLD.abandoned THEN
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
       OR NEW.started_at <> OLD.started_at OR NEW.kind <> OLD.kind
       OR NEW.harness_version <> OLD.harness_version OR NEW.mcp_support <> OLD.mcp_support
       OR NEW.extension <> OLD.extension OR NEW.declared_model <> OLD.declared_model
       OR NEW.tool_policy_digest <> OLD.tool_policy_digest OR NEW.tenant <> OLD.tenant THEN
        RAISE EXCEPTION 'catalog.operations: only the outcome of a pending row may be written'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd


ALTER TABLE catalog.operations DROP COLUMN IF EXISTS abandoned;
