package postgres

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sharedos/toolshare/catalog-svc/internal/store"
	"github.com/sharedos/toolshare/catalog-svc/internal/store/storetest"
	"github.com/sharedos/toolshare/catalog-svc/migrations"
	"github.com/sharedos/toolshare/services/platform/pgdb"
	"github.com/sharedos/toolshare/services/platform/pgdb/pgtest"
)

// The loser of two creates of one name at once can trip the collision or
// lower-case index before the primary key its ON CONFLICT names (a race
// seen 1 in ~4 rounds of four goroutines): that is ErrAlreadyExists, as a
// create after the other one is, never a conflict of the name with itself.
// Another name's clash on those indexes stays a ConflictError.
func TestARaceOnAnotherUniqueIndexIsAlreadyExists(t *testing.T) {
	ctx := context.Background()
	pool, err := pgdb.Open(ctx, pgtest.NewDatabase(t, migrations.Up))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s := New(pool)
	if _, err := s.Create(ctx, storetest.Record("t03.x")); err != nil {
		t.Fatal(err)
	}
	for _, index := range []string{"tools_collision_key_key", "tools_name_lower_key"} {
		lost := &pgconn.PgError{Code: uniqueViolation, ConstraintName: index}
		if err := s.translate(ctx, lost, "t03.x", "create"); !errors.Is(err, store.ErrAlreadyExists) {
			t.Errorf("%s, same name: %v, want ErrAlreadyExists", index, err)
		}
		var conflict *store.ConflictError
		if err := s.translate(ctx, lost, "T03.x", "create"); !errors.As(err, &conflict) || conflict.Existing != "t03.x" {
			t.Errorf("%s, another name: %v, want a ConflictError naming t03.x", index, err)
		}
	}
}
