// Package storetest is the conformance suite every store.Store backend must
// pass (store/memory and store/postgres run it from their tests), so that
// the catalog service behaves the same on the embedded store as in
// production.
package storetest
