// Package devstack is `make run`: it starts every SharedOS toolshare process
// on loopback (embedded store by default, PostgreSQL when
// SHAREDOS_DATABASE_URL is set), waits for health, registers the example
// catalogue from deploy/catalog, opens a demo turn and prints how to point a
// harness at it. Ctrl-C stops every process it started. Services are told
// everything by flags: they start without sharedos-dev's SHAREDOS_ settings
// (SHAREDOS_LOG_LEVEL aside).
package devstack
