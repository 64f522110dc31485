// Package memory is the embedded operation-record store: the same contract as
// the PostgreSQL store (recordstest runs against both), kept in process for
// `make run` and tests. Records do not survive a restart, so Reconcile only
// matters for rows whose completion write was skipped. The kernel keeps the
// newest finished records up to --embedded-record-limit (WithRetention):
// older ones are dropped, pending ones never, and a repeat of a dropped
// call is still refused while its turn may call.
package memory
