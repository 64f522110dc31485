package catalog_test

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sharedos/toolshare/services/platform/pgdb/pgtest"

	"github.com/sharedos/toolshare/catalog-svc/internal/store/postgres"
	"github.com/sharedos/toolshare/catalog-svc/migrations"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func openPool(t testing.TB, dsn string) *pgxpool.Pool { return pgtest.Pool(t, dsn) }

// Two catalog-svc replicas over one PostgreSQL database: every change made
// on one is in the other's cache within 1 s (LISTEN/NOTIFY).
func TestChangeFeedAcrossReplicasPostgres(t *testing.T) {
	dsn := pgtest.NewDatabase(t, migrations.Up)
	a := newService(t, postgres.New(openPool(t, dsn)), nil)
	b := newService(t, postgres.New(openPool(t, dsn)), nil)
	testReplicas(t, a, b)
}

// A replica started after tools exist loads them, with their stored
// canonical bytes, exactly as the writing replica serves them.
func TestStartLoadsExistingPostgres(t *testing.T) {
	dsn := pgtest.NewDatabase(t, migrations.Up)
	a := newService(t, postgres.New(openPool(t, dsn)), nil)
	registerAll(t, a, "files.read", "github.search")
	b := newService(t, postgres.New(openPool(t, dsn)), nil)
	la, err := a.ListTools(testCtx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	lb, err := b.ListTools(testCtx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if la.CatalogHash != lb.CatalogHash || len(lb.Tools) != 2 || lb.CatalogHash != hashOf(lb.Tools) {
		t.Fatalf("replica hashes %s / %s over %d tools", la.CatalogHash, lb.CatalogHash, len(lb.Tools))
	}
	for i := range la.Tools {
		if string(la.Tools[i].GetInputSchemaJson()) != string(lb.Tools[i].GetInputSchemaJson()) {
			t.Errorf("input schema not verbatim across replicas: %q vs %q", la.Tools[i].GetInputSchemaJson(), lb.Tools[i].GetInputSchemaJson())
		}
	}
}
