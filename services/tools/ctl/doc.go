// Package ctl implements sharedosctl, the operator CLI. It talks gRPC to the
// services (defaults: the `make run` addresses), prints JSON on stdout
// (`--output table` for people) and errors on stderr with a non-zero exit.
// The commands, flags and JSON fields are a contract others test against.
// Text others chose (a principal, an upstream's definitions, a reason, an
// error) never reaches the terminal as a character that drives it or hides
// text: escape.go's hiddenRune decides, for JSON (\u escapes decoding to the
// same values), tables, `tools diff --output table` and errors (one line).
package ctl
