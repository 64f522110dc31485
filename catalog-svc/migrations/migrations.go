package migrations

import (
	"context"
	"embed"
	"io"

	"github.com/sharedos/toolshare/services/platform/pgdb/migrate"
)

//go:embed *.sql
var files embed.FS

// set keeps goose's bookkeeping in a service-named table and serialises
// concurrent migrators (several pods starting at once) on its own lock.
var set = migrate.Set{Files: files, VersionTable: "catalog_goose_db_version", LockID: 0x5348_4152_4543_4154} // "SHARECAT"

// ServiceRole is the least-privilege role the migrations create and grant
// (00004_service_role.sql), which catalog-svc acts as (ADR 0013).
const ServiceRole = "sharedos_catalog"

// ErrPending is returned by Check when the schema is behind the binary.
var ErrPending = migrate.ErrPending

// Up applies every pending migration.
func Up(ctx context.Context, dsn string) error { return set.Up(ctx, dsn) }

// Check returns nil when the schema is current, ErrPending when migrations
// are pending (the Helm wait-for-migration init container runs it).
func Check(ctx context.Context, dsn string) error { return set.Check(ctx, dsn) }

// Command runs `catalog-svc migrate [--check]` and returns its exit code.
func Command(ctx context.Context, args []string, stderr io.Writer) int {
	return set.Command(ctx, "catalog-svc migrate", args, stderr)
}
