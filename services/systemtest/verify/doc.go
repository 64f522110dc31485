// Package verify is the reliability and security suite of SharedOS toolshare
// (`make verify`). It has no library code: its tests start the real service
// binaries from bin/ as separate processes, on loopback, against a private
// PostgreSQL cluster each run creates (initdb into a temporary directory), so
// they can kill, hang and restart any of them — including PostgreSQL —
// without touching the shared server other work uses.
//
// Every test checks an exact outcome and that the operation records match
// the attempts ("nothing lost"): see docs/reliability.md for the guarantees
// and which test proves each.
package verify
