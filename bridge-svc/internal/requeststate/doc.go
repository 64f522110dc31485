// Package requeststate seals the requestState of an MCP input-required
// result (2026-07-28, SEP-2322) so any bridge pod can open it and nobody
// else can read or alter it: AES-256-GCM under a key derived (HKDF-SHA256)
// from the bridge's state key, the turn id as associated data, an expiry
// inside. A state altered, cut, forged, from another turn, past its expiry
// or sealed under a key this pod does not hold is refused (ADR 0017).
package requeststate
