-- +goose Up
-- Operation records: one row per tool-call attempt (see internal/oprecord).
-- The table is append-only for the service role: triggers refuse DELETE,
-- TRUNCATE and any UPDATE of a row that is no longer pending, and an UPDATE
-- of a pending row may only fill in the outcome columns.
CREATE TABLE catalog.operations (
    sequence              bigserial   PRIMARY KEY,
    attempt_id            text        NOT NULL UNIQUE,
    call_id               text        NOT NULL,
    turn_id               text        NOT NULL,
    duplicate             boolean     NOT NULL DEFAULT false,
    principal             text        NOT NULL DEFAULT '',
    requested_tool        text        NOT NULL,
    requested_tool_sha256 text        NOT NULL,
    resolved_tool         text        NOT NULL DEFAULT '',
    catalog_hash          text        NOT NULL DEFAULT '',
    arguments_digest      text        NOT NULL DEFAULT '',
    decision_id           text        NOT NULL DEFAULT '',
    policy_revision       text        NOT NULL DEFAULT '',
    status                text        NOT NULL,
    code                  text        NOT NULL DEFAULT '',
    reason                text        NOT NULL DEFAULT '',
    instance_id           text        NOT NULL DEFAULT '',
    harness               text        NOT NULL DEFAULT '',
    trace_id              text        NOT NULL DEFAULT '',
    started_at            timestamptz NOT NULL,
    finished_at           timestamptz,
    CONSTRAINT operations_status_check CHECK (status IN
        ('pending', 'succeeded', 'denied', 'failed', 'cancelled', 'interrupted')),
    CONSTRAINT operations_requested_tool_len CHECK (octet_length(requested_tool) <= 256),
    CONSTRAINT operations_finished_check CHECK ((status = 'pending') = (finished_at IS NULL))
);

-- One first attempt per (turn, call); refused repeats are extra rows.
CREATE UNIQUE INDEX operations_turn_call_first ON catalog.operations (turn_id, call_id) WHERE NOT duplicate;
CREATE INDEX operations_turn_seq ON catalog.operations (turn_id, sequence);
CREATE INDEX operations_pending ON catalog.operations (started_at) WHERE status = 'pending';

-- +goose StatementBegin
CREATE FUNCTION catalog.operations_append_only() RETURNS trigger
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

CREATE TRIGGER operations_no_rewrite BEFORE UPDATE OR DELETE ON catalog.operations
    FOR EACH ROW EXECUTE FUNCTION catalog.operations_append_only();
CREATE TRIGGER operations_no_truncate BEFORE TRUNCATE ON catalog.operations
    FOR EACH STATEMENT EXECUTE FUNCTION catalog.operations_append_only();

-- +goose Down
DROP TABLE IF EXISTS catalog.operations;
DROP FUNCTION IF EXISTS catalog.operations_append_only();
