// Package store defines catalog-svc's persistence contract for tool
// registrations (tools only; operation records live in internal/pipeline/records).
//
// Two backends implement Store: store/postgres (production, pgx/v5) and
// store/memory (embedded, for `make run` and unit tests). Both are held to
// the same behaviour by the conformance suite in store/storetest, so the
// catalog service cannot tell them apart.
//
// A store enforces the uniqueness rules race-free (Postgres unique indexes,
// the memory store's mutex) because a check in the caller followed by a
// write would let two concurrent registrations of colliding names both win.
package store
