// Package recordstest is the conformance suite every records.Store passes:
// the embedded store and the PostgreSQL store run the same checks, so the
// audit guarantees do not depend on the deployment.
package recordstest
