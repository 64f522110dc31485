// Package postgres is the PostgreSQL operation-record store (table
// catalog.operations, migration 00003). Append-only is enforced by the
// table's triggers as well as by this code, so a bug here or a stray
// UPDATE/DELETE from the service role cannot rewrite history. No index
// names a column a completion writes, so a completion is a heap-only
// update; pending rows are searched for from catalog.reconcile_watermark
// on (migration 00014, ADR 0027).
package postgres
