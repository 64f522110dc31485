// Package policy holds no code: its test runs the Rego unit tests of the
// example policy (deploy/policies/**/*_test.rego) inside `go test`, through
// OPA's tester package, with strict builtin errors as the server uses.
package policy
