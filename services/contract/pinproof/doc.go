// Package pinproof is how a turn's pin of tools and prompts travels: the
// kernel signs into the turn grant the root of a Merkle tree over the
// pinned entries (RFC 6962 hashing, golang.org/x/mod/sumdb/tlog; one leaf
// per entry, "<kind>\x00<name>\x00<digest>", in kind and name order), and
// each call carries only its one entry's pinned digest with its inclusion
// proof (log2 N hashes): what the kernel needs to check that one tool or
// prompt, not the whole pin (issue 15, ADR 0015 amended). A turn's concrete
// resource URIs are a second tree of the same shape; a URI read through a
// template proves instead that it is not a leaf there (the two adjacent
// leaves it would sit between), since the exact URI wins over any template.
package pinproof
