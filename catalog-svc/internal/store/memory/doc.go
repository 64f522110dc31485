// Package memory is the embedded registration store: everything in process
// memory, nothing persisted. It backs `make run` without PostgreSQL and the
// unit tests, and passes the same conformance suite (store/storetest) as
// store/postgres; its change feed reaches the subscribers of this process
// only.
package memory
