// Package decisionlog writes one structured record per authorization
// decision (ADR 0003): a slog JSON line with the trace and span ids, the
// decision id, the policy revision, who asked for what, a SHA-256 digest of
// the arguments (never the arguments themselves: they may hold secrets and
// personal data), the result and the duration.
//
// Records are written with context.WithoutCancel, so a request cancelled
// while it was being decided still leaves its record.
package decisionlog
