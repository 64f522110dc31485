// Package stacktest starts the `make run` stack from the built binaries
// (bin/sharedos-dev and the services it launches) on free loopback ports,
// for end-to-end tests and real-path benchmarks in any module. The stack
// is stopped with SIGINT in the test's cleanup.
package stacktest
