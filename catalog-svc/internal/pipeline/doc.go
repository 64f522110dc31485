// Package pipeline is the kernel: the enforcement pipeline behind
// RuntimeService, the single enforcement point every tool call passes
// through (served by server.RuntimeServer, ADR 0008). InvokeTool runs one
// attempt in a fixed order, and each step only runs if the one before it
// let the call through. The turn's AccessContext and pinned catalogue come
// only from the call's turn grant, which the kernel signed at GrantTurn
// (grants, ADR 0015); a missing, forged, altered, expired or other turn's
// grant is denied/invalid_grant, recorded, and nothing else runs.
//
//  1. write the operation record, pending (nothing happens unless it is
//     durable; a repeated call id is refused and recorded here); from here
//     on the call reads whether its turn was revoked (RevokeTurn), and a
//     revocation cancels it;
//  2. resolve the raw requested name within the turn's pinned catalogue
//     (unknown, malformed, deregistered, outside the pin, drifted or not
//     managed → denied/tool_unavailable);
//  3. validate the arguments (one JSON object, UTF-8, ≤ 1 MiB, depth ≤ 64, no
//     duplicate keys, numbers ≤ 128 characters that a double holds as
//     written (jsonlimits.CheckNumber), ≤ 65,536 values of which ≤ 16,384
//     objects and arrays, the tool's inputSchema →
//     failed/invalid_arguments naming the failing JSON path);
//  4. resolve the requirement (action + resource) from the arguments;
//  5. Authorize with a deadline (deny → denied/permission_denied;
//     authz-svc's evaluation error, its ErrorInfo AUTHZ_EVAL_ERROR whatever
//     the code → failed/authz_error; otherwise unreachable or deadline →
//     failed/authz_unavailable, any other error → failed/authz_error; never
//     an allow);
//  6. only on allow, and if the turn was not revoked (denied/invalid_grant),
//     call the provider with the per-tool timeout and the byte-identical
//     argument bytes that were authorized;
//  7. complete the record durably, then answer (ADR 0007).
//
// Every attempt, refusals included, is answered with a ToolResult; a gRPC
// error means the call could not be taken at all (no record could be
// written, or the request lacks a call or turn id). Nothing is retried: a
// tool call is not idempotent. Client cancellation reaches the handler's
// context and the attempt ends cancelled; the completion write is detached
// from the client's context so the record is completed anyway. A panic in
// the kernel once the record is written ends the attempt failed/internal,
// recorded and answered as every outcome is, the call out of its turn's
// calls in flight (the process lives on: grpcx recovers panics).
//
// The answer never says more than the record (ADR 0007): it leaves only once
// the completion is committed, or fsynced into the record journal while the
// store is down (the journal writes it when the store is back, also after a
// crash of this process). Without a durable journal the kernel waits for the
// store until shortly before the caller's deadline and otherwise answers
// failed/record_unavailable, which the record then says too. Reconcile marks
// interrupted only rows whose outcome nobody knew.
package pipeline
