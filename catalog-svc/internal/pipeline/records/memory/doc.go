// Package memory is the embedded operation-record store: the same contract as
// the PostgreSQL store (recordstest runs against both), kept in process for
// `make run` and tests. Records do not survive a restart, so Reconcile only
// matters for rows whose completion write was skipped.
package memory
