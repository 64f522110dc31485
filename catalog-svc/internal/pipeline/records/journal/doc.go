// Package journal keeps the operation-record completions the store could not
// take when their calls ended, until it can: the kernel's answer to a client
// is never stronger than what a record will say (ADR 0007).
//
// A durable journal is a directory. Each process appends to its own file
// there, one JSON line per completion, fsynced before Add returns, and holds
// an exclusive flock(2) on it for as long as it runs. A file whose lock can
// be taken belongs to a process that has stopped (SIGKILL included): the
// next process to open the directory, or a live sibling (at its next flush,
// or within its Run interval when it keeps nothing of its own), adopts it,
// writes its completions to the store and removes it. So a completion that
// was acknowledged to a client survives a PostgreSQL outage, a PostgreSQL
// crash and a kernel crash, and is written as soon as the store is back. A
// line whose write fails partway is cut off again, so that it never sits in
// front of later ones.
//
// A directory journals the records of one store: its marker (StoreFile,
// written by BindStore at the first start) names the PostgreSQL database,
// and a kernel of another database is refused before it opens the journal —
// replayed there, the completions would find no such record and be dropped.
//
// A memory-only journal (no directory) queues completions the same way but
// loses them with the process; the kernel then answers a client only once
// the store has the record, or says the record is not written.
package journal
