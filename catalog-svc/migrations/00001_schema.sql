-- +goose Up
CREATE SCHEMA IF NOT EXISTS catalog;

-- +goose Down
DROP SCHEMA IF EXISTS catalog CASCADE;
