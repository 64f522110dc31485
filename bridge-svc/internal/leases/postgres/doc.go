// Package postgres is the lease store in PostgreSQL (schema bridge), the one
// that lets any bridge pod serve any turn: every pod reads the same rows and
// decides expiry with the database's clock.
package postgres
