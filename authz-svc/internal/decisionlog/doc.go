// Package decisionlog writes one structured record per authorization
// decision (ADR 0003): a slog JSON line with the trace and span ids, the
// decision id, the policy revision, who asked for what, a SHA-256 digest of
// the arguments (never the arguments themselves: they may hold secrets and
// personal data), the result and the duration.
//
// Records are written with context.WithoutCancel, so a request cancelled
// while it was being decided still leaves its record. Serving, they go to
// stderr through a Sink, a bounded queue a goroutine of its own writes: a
// decision never waits on its record's write, and a record the queue of a
// stalled sink has no room for is dropped, counted and warned of.
package decisionlog
