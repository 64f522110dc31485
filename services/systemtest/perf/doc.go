// Package perf is the measurement tier (build tag `perf`, never part of
// `make test`): `make profile` — the make-run stack with --debug-listen on
// every service, the full tools/call path driven at c=16 by the raw
// JSON-RPC client of the benchmarks, and a CPU and an allocation profile of
// every process saved under bin/profiles/ — and `make bench-quick`, the
// headline ratios of docs/benchmarks.md measured in one run, interleaved,
// with the load and the foreign CPU reported. Nothing here asserts a time.
package perf
