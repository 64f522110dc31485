// Package migrations holds bridge-svc's PostgreSQL schema (schema "bridge")
// as goose SQL migrations embedded in the binary. They are applied by
// `bridge-svc migrate` (and by `serve --migrate` for local use), never
// implicitly by serve: in production a Helm hook Job runs them once.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed *.sql
var files embed.FS

// versionTable keeps goose's bookkeeping inside this service's schema-named
// table, so every service can share one database.
const versionTable = "bridge_goose_db_version"

// lockID is the advisory lock that serialises concurrent migrators
// (several pods starting at once).
const lockID = 0x5348_4152_4542_5247 // "SHAREBRG"

func provider(db *sql.DB) (*goose.Provider, error) {
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(lockID))
	if err != nil {
		return nil, fmt.Errorf("migrations: session locker: %w", err)
	}
	return goose.NewProvider(goose.DialectPostgres, db, files,
		goose.WithTableName(versionTable),
		goose.WithSessionLocker(locker),
		goose.WithDisableGlobalRegistry(true),
	)
}

func open(dsn string) (*sql.DB, error) {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, fmt.Errorf("migrations: open database: %w", err)
	}
	return db, nil
}

// Up applies every pending migration.
func Up(ctx context.Context, dsn string) error {
	db, err := open(dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	p, err := provider(db)
	if err != nil {
		return err
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrations: up: %w", err)
	}
	return nil
}

// ErrPending is returned by Check when the schema is behind the binary.
var ErrPending = errors.New("migrations: schema has pending migrations")

// Check returns nil when the database schema is current, ErrPending when
// migrations are pending (used by the Helm wait-for-migration init container).
func Check(ctx context.Context, dsn string) error {
	db, err := open(dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	p, err := provider(db)
	if err != nil {
		return err
	}
	pending, err := p.HasPending(ctx)
	if err != nil {
		return fmt.Errorf("migrations: check: %w", err)
	}
	if pending {
		return ErrPending
	}
	return nil
}
