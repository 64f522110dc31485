// Package npme2e holds the bridge's end-to-end test with the official npm
// clients pinned in e2e/npm: the TypeScript SDK client and the MCP
// conformance suite, run against a real bridge turn whose catalogue
// includes the conformance provider's fixture tools. npm installs the
// pinned lockfile into e2e/npm/node_modules when it is missing.
package npme2e
