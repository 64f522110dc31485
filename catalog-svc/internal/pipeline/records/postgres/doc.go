// Package postgres is the PostgreSQL operation-record store (table
// catalog.operations, migration 00003). Append-only is enforced by the
// table's triggers as well as by this code, so a bug here or a stray
// UPDATE/DELETE from the service role cannot rewrite history.
package postgres
