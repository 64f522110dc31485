package migrate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// Set is one service's migrations.
type Set struct {
	// Files holds the *.sql migrations at its root.
	Files fs.FS
	// VersionTable is goose's bookkeeping table, named for the service
	// (e.g. "catalog_goose_db_version").
	VersionTable string
	// LockID is the advisory lock serialising this service's migrators.
	LockID int64
}

// ErrPending is returned by Check when the schema is behind the binary.
var ErrPending = errors.New("migrate: schema has pending migrations")

func (s Set) provider(db *sql.DB) (*goose.Provider, error) {
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(s.LockID))
	if err != nil {
		return nil, fmt.Errorf("migrate: session locker: %w", err)
	}
	return goose.NewProvider(goose.DialectPostgres, db, s.Files,
		goose.WithTableName(s.VersionTable),
		goose.WithSessionLocker(locker),
		goose.WithDisableGlobalRegistry(true),
	)
}

func (s Set) with(dsn string, f func(*goose.Provider) error) error {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return fmt.Errorf("migrate: open database: %w", err)
	}
	defer func() { _ = db.Close() }()
	p, err := s.provider(db)
	if err != nil {
		return err
	}
	return f(p)
}

// Up applies every pending migration.
func (s Set) Up(ctx context.Context, dsn string) error {
	return s.with(dsn, func(p *goose.Provider) error {
		if _, err := p.Up(ctx); err != nil {
			return fmt.Errorf("migrate: up: %w", err)
		}
		return nil
	})
}

// Check returns nil when every migration this binary knows is applied (a
// database ahead of the binary is fine: rollbacks work), ErrPending
// otherwise. The Helm wait-for-migration init containers run it.
func (s Set) Check(ctx context.Context, dsn string) error {
	return s.with(dsn, func(p *goose.Provider) error {
		pending, err := p.HasPending(ctx)
		if err != nil {
			return fmt.Errorf("migrate: check: %w", err)
		}
		if pending {
			return ErrPending
		}
		return nil
	})
}
