// Package devstack is `make run`: it starts every SharedOS toolshare process
// on loopback (embedded store by default, PostgreSQL when
// SHAREDOS_DATABASE_URL is set), waits for health, registers the example
// catalogue from deploy/catalog, opens a demo turn and prints how to point a
// harness at it. Ctrl-C stops every process it started.
package devstack
