// Package launch is the one launcher of the system tests: Start runs the
// stack from the built binaries in bin/ as separate processes on free
// loopback ports, composed exactly as `make run` composes it
// (devstack.Services), and Proc is how every test starts, signals, stops,
// kills and restarts a process. The e2e tests, the verify tier and the
// real-path benchmarks of every module use it.
package launch
