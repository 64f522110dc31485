// Package records is the kernel's audit trail: one operation record per
// tool-call attempt, written before anything can have an effect and
// completed once the outcome is known.
//
// Invariants every Store keeps (and recordstest checks on each backend):
//   - Begin commits a pending row before it returns; the kernel does nothing
//     else for an attempt whose Begin failed.
//   - Exactly one row per attempt. A repeated (turn id, call id) is refused
//     with ErrDuplicateCall, and the repeat is itself recorded as its own,
//     already completed row (denied/duplicate_call) marked Duplicate, so
//     "rows == attempts" holds and a replay is visible.
//   - Append-only: a completed row is never changed again and no row is
//     deleted but by the owner's purge of a noted export (docs/retention.md;
//     PostgreSQL enforces this with triggers, not just code). The embedded
//     store, whose records end with the process, keeps a bounded number of
//     the newest finished ones (memory.WithRetention), never a pending one.
//   - A pending row whose process died stays pending until Reconcile marks it
//     interrupted; it never disappears.
//   - Free text never reaches storage raw: the requested tool name is escaped
//     (strconv.Quote rules, so NUL and invalid UTF-8 become visible escapes)
//     and capped at 256 bytes next to the SHA-256 of the full raw name;
//     argument values are never stored, only their SHA-256.
package records
