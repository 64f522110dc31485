// Package grants issues and verifies turn grants (ADR 0015): the signed
// statement, made by the kernel at GrantTurn, of which AccessContext a turn
// runs under and which catalogue it pinned. The kernel takes a call's
// context and pin from its grant alone, so no caller can assert either.
//
// A grant is a compact JWS (go-jose) signed with Ed25519 by a key only
// catalog-svc holds; its header names the key (kid), so a retired key can
// still verify the grants it signed while a new one signs. Verification is
// memoised by the grant's exact bytes: a turn's calls pay for the signature
// once per process.
package grants
