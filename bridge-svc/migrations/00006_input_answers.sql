-- +goose Up
-- 2025-era input rounds (ADR 0017): a client's answer to an input request
-- may reach another pod than the one whose call asked. That pod stores it
-- here and announces its id (NOTIFY sharedos_input_answer); the asking pod
-- takes it (DELETE ... RETURNING: once). Answers nobody took are dropped
-- after 15 minutes, longer than any round waits.
CREATE TABLE bridge.input_answers (
    id         text PRIMARY KEY CHECK (char_length(id) <= 64),
    turn_id    text NOT NULL,
    session_id text NOT NULL,
    result     bytea,
    error      bytea,
    passed_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX input_answers_passed_at ON bridge.input_answers (passed_at);
GRANT SELECT, INSERT, DELETE ON bridge.input_answers TO sharedos_bridge;

-- +goose Down
REVOKE ALL ON bridge.input_answers FROM sharedos_bridge;
DROP TABLE IF EXISTS bridge.input_answers;
