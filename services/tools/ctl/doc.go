// Package ctl implements sharedosctl, the operator CLI. It talks gRPC to the
// services (defaults: the `make run` addresses), prints JSON on stdout
// (`--output table` for people) and errors on stderr with a non-zero exit.
// The commands, flags and JSON fields are a contract others test against.
package ctl
