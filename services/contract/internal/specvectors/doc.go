// Package specvectors reads the shared specification's test vectors for the
// kernel packages' tests. The vectors live in services/contract/testdata (a
// copy, so a clone tests alone); when the shared spec directory sits beside
// the repository (<repo>/../shared/spec, as in CI) the copy must be
// byte-identical to it, so the two cannot drift.
package specvectors
