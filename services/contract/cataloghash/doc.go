// Package cataloghash computes catalogHash, the identity of the tool set a
// harness was given (shared/spec/catalog-hash.md):
//
//	catalogHash = lowercase_hex(SHA-256(JCS(sort_by_name(map(project, tools)))))
//
// It never canonicalizes. Each tool's canonical projection is computed once,
// at registration, by package projection and cached; the hash of any subset
// is then a sort by name and the bytes "[" c1 "," c2 … "]" streamed into
// SHA-256. That is exactly JCS of the sorted array, because a JCS array is
// its canonical elements joined by commas with no whitespace. The work is
// one pass of SHA-256 over the catalogue, with a fixed number of
// allocations whatever the number of tools.
//
// Names are ASCII (ToolNameSchema), so byte order is the spec's order. Two
// entries with one name should not exist; if they do, they are ordered by
// their canonical bytes so the hash still does not depend on input order.
package cataloghash
