// Package leases owns turn leases: what a turn was given (its pinned
// catalogue and SystemIdentity), the secret that opens its MCP endpoint, and
// whether it is still open. The Store role interface has two implementations
// (memory and postgres) held to one conformance suite (storetest); Service
// implements sharedosv1.BridgeServiceServer on top of a Store and the
// Kernel, which grants each turn at OpenTurn and revokes it at CloseTurn.
// A closed or expired lease stays in the store (GetTurn still reports it)
// until Store.PurgeInactive deletes it: bridge-svc's sweeper does so once
// it is older than --lease-retention.
package leases
