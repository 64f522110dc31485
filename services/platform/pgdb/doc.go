// Package pgdb opens the PostgreSQL connection pools of SharedOS services
// with one set of defaults (pool size, connect timeout, health checks) and
// error messages that never carry the password of the DSN they came from:
// connection errors end up in logs and in startup failures printed by
// Kubernetes, where a leaked credential stays.
//
// Pools opened here carry a pgx Tracer: each statement run in a traced
// request becomes an OpenTelemetry client span ("INSERT catalog.operations")
// with the operation, table, database and SQLSTATE, never the query text or
// its arguments.
//
// A Group commits the single statements of concurrent callers together (one
// round trip, one commit for a batch; ADR 0025); each caller still returns
// only once its own statement has committed. Locks are named session
// advisory locks, what orders work across a service's replicas.
//
// Tests get per-test databases from the pgtest subpackage.
package pgdb
