// Package e2e holds the end-to-end tests of the `make run` stack: the built
// binaries (never `go run`) started by bin/sharedos-dev, driven only through
// bin/sharedosctl and real MCP clients. `make test` builds the binaries first.
package e2e
