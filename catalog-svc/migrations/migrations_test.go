package migrations_test

import (
	"os"
	"testing"

	"github.com/sharedos/toolshare/services/platform/pgdb/pgtest"
)

// Two databases of one cluster migrated at once both create the
// cluster-wide service role: the migration that loses the race goes on.
func TestServiceRoleMadeConcurrently(t *testing.T) {
	sql, err := os.ReadFile("00004_service_role.sql")
	if err != nil {
		t.Fatal(err)
	}
	pgtest.CheckRoleMadeConcurrently(t, sql, "sharedos_catalog")
}
