// Package pgtest gives each test its own PostgreSQL database, cloned from a
// template database that is migrated once per test process, so tests run in
// parallel (within and across packages) against a real server without
// seeing each other's rows and without paying for migrations per test.
//
// The server is found through SHAREDOS_TEST_PG_DSN (default
// postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable); the role must
// be allowed to create databases. When it cannot be reached the test fails
// (never skips) with instructions for starting PostgreSQL.
//
// Database names carry their creation time (sharedos_tmpl_<unix>_…,
// sharedos_test_<unix>_…). A package that wants its template dropped at exit
// calls Main from TestMain; leftovers of crashed or Main-less runs older than
// StaleAfter are dropped the next time a template is created, which is safe
// with concurrent test processes because no live process keeps a database
// that long.
package pgtest
