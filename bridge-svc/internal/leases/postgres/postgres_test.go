package postgres_test

import (
	"context"
	"testing"

	"github.com/sharedos/toolshare/bridge-svc/internal/leases"
	"github.com/sharedos/toolshare/bridge-svc/internal/leases/postgres"
	"github.com/sharedos/toolshare/bridge-svc/internal/leases/storetest"
	"github.com/sharedos/toolshare/bridge-svc/migrations"
	"github.com/sharedos/toolshare/services/platform/pgdb"
	"github.com/sharedos/toolshare/services/platform/pgdb/pgtest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) leases.Store {
		dsn := pgtest.NewDatabase(t, migrations.Up)
		pool, err := pgdb.Open(context.Background(), dsn)
		if err != nil {
			t.Fatalf("open %s: %v", pgdb.RedactDSN(dsn), err)
		}
		t.Cleanup(pool.Close)
		return postgres.New(pool)
	})
}
