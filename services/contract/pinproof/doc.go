// Package pinproof is how a turn's pin of tools travels: the kernel signs
// into the turn grant the root of a Merkle tree over the pinned tools
// (RFC 6962 hashing, golang.org/x/mod/sumdb/tlog; one leaf per tool,
// "tool\x00<name>\x00<digest>", in name order), and each call carries only
// the called tool's pinned digest with its inclusion proof (log2 N hashes):
// what the kernel needs to check that one tool, not the whole pin
// (issue 15, ADR 0015 amended).
package pinproof
