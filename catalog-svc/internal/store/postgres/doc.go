// Package postgres is the production registration store: PostgreSQL through
// a pgx/v5 pool, schema "catalog" (migrations/00002_tools.sql).
//
// Every write sends NOTIFY catalog_changes inside its own transaction, so
// the notification is delivered exactly when the change commits; Watch
// LISTENs on a dedicated connection (reconnecting after failures, then
// reporting "everything changed" because notifications may have been missed)
// and so carries every replica's changes to every other replica. A batch is
// announced as "everything changed"; the Store that wrote it leaves that
// notice out of its own feed, recognised by the sending backend's PID
// (own.go), since its caller applies the records CreateBatch returns.
//
// Uniqueness (exact name, collision key, lower-case name) is enforced by
// unique indexes, so concurrent registrations cannot both win. Batch
// registration streams rows with COPY into the table in one transaction; when
// a unique index refuses a row, one query over the batch's names and keys
// names the stored tool it clashed with.
//
// Delete keeps the tool's last revision in catalog.tool_tombstones (migration
// 00020) in its transaction; Create and CreateBatch, in theirs, start a name
// found there at that revision + 1 and remove the row, so a name's revisions
// never repeat across deletion, whichever replica deletes and re-creates.
package postgres
