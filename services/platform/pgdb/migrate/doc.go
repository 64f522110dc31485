// Package migrate applies a service's embedded goose SQL migrations. Each
// service keeps its own schema, version table and advisory lock, so several
// services share one database and several pods of one service can start at
// once (the lock serialises them). Services run it from their `migrate`
// command and a Helm hook Job, never implicitly from `serve`.
package migrate
