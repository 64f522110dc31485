//go:build !unix

package app

// openFileLimit is unknown here: defaultMaxConnections takes its fallback.
func openFileLimit() (uint64, bool) { return 0, false }
