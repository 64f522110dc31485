-- +goose Up
-- A turn's answers waiting to be taken are counted at each pass (the
-- per-turn budget, leases.MaxPassedAnswers).
CREATE INDEX input_answers_turn ON bridge.input_answers (turn_id);

-- +goose Down
DROP INDEX IF EXISTS bridge.input_answers_turn;
