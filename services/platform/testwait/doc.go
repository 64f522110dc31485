// Package testwait waits in tests for a condition, never for a duration:
// Until polls it, bounded only by the test's own deadline.
package testwait
