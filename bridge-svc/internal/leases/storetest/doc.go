// Package storetest is the conformance suite every leases.Store must pass;
// the memory and postgres stores both run it.
package storetest
