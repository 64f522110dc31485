package e2e

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sharedos/toolshare/services/platform/pgdb/pgtest"
	"github.com/sharedos/toolshare/services/systemtest/launch"
)

// TestServiceRolesOnPostgres runs the stack on one PostgreSQL database (the
// services migrate it and then act as their roles, so every call below
// already proves the roles suffice), makes calls, and then tries as each
// service role what a stolen service credential would: catalog-svc's role
// cannot disable the append-only triggers, rewrite a finished record or its
// identity columns, delete, truncate, run DDL or read the bridge's schema;
// bridge-svc's role touches bridge.leases only (ADR 0013).
func TestServiceRolesOnPostgres(t *testing.T) {
	dsn := pgtest.NewDatabase(t, noMigrate)
	s := startStack(t, launch.Options{DatabaseURL: dsn})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := mcpClient(t, ctx, s.Demo.MCPURL, s.Demo.Token)
	call(t, ctx, c, "files.read", map[string]any{"path": "/public/a.txt"})
	call(t, ctx, c, "files.read", map[string]any{"path": "/private/a.txt"})

	as := func(role string) *pgx.Conn {
		cfg, err := pgx.ParseConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		cfg.RuntimeParams["role"] = role
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			t.Fatalf("connect as %s: %v", role, err)
		}
		t.Cleanup(func() { conn.Close(context.Background()) })
		return conn
	}
	refused := func(conn *pgx.Conn, what, sql, want string) {
		t.Helper()
		var args []any
		if strings.Contains(sql, "$1") {
			args = append(args, s.Demo.TurnID)
		}
		_, err := conn.Exec(ctx, sql, args...)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "42501" || !strings.Contains(pe.Message, want) {
			t.Errorf("%s: %v, want SQLSTATE 42501 (%s)", what, err, want)
		}
	}
	catalog, bridge := as("sharedos_catalog"), as("sharedos_bridge")

	var n int
	if err := catalog.QueryRow(ctx, `SELECT count(*) FROM catalog.operations WHERE turn_id = $1 AND status <> 'pending'`, s.Demo.TurnID).Scan(&n); err != nil || n != 2 {
		t.Fatalf("the catalog role reads %d finished records of the demo turn (%v), want 2", n, err)
	}
	refused(catalog, "disable the append-only trigger", `ALTER TABLE catalog.operations DISABLE TRIGGER operations_no_rewrite`, "must be owner")
	refused(catalog, "rewrite a finished record", `UPDATE catalog.operations SET status = 'succeeded', code = '' WHERE turn_id = $1`, "can no longer change")
	refused(catalog, "rewrite a record's identity", `UPDATE catalog.operations SET principal = 'mallory' WHERE turn_id = $1`, "permission denied")
	// The run's SystemIdentity is written with the row (from the grant) and
	// never changed.
	if err := catalog.QueryRow(ctx, `SELECT count(*) FROM catalog.operations WHERE turn_id = $1 AND harness = 'demo'
	   AND mcp_support = 'native' AND tool_policy_digest LIKE 'sha256:%'`, s.Demo.TurnID).Scan(&n); err != nil || n != 2 {
		t.Fatalf("%d records of the demo turn carry its SystemIdentity (%v), want 2", n, err)
	}
	refused(catalog, "rewrite a record's system identity", `UPDATE catalog.operations SET declared_model = 'other', tool_policy_digest = '' WHERE turn_id = $1`, "permission denied")
	refused(catalog, "delete records", `DELETE FROM catalog.operations WHERE turn_id = $1`, "permission denied")
	refused(catalog, "truncate records", `TRUNCATE catalog.operations`, "permission denied")
	refused(catalog, "DDL", `CREATE TABLE catalog.evil (turn text)`, "permission denied")
	refused(catalog, "read the bridge's schema", `SELECT count(*) FROM bridge.leases WHERE turn_id = $1`, "permission denied")

	if err := bridge.QueryRow(ctx, `SELECT count(*) FROM bridge.leases WHERE turn_id = $1`, s.Demo.TurnID).Scan(&n); err != nil || n != 1 {
		t.Fatalf("the bridge role reads %d leases of the demo turn (%v), want 1", n, err)
	}
	refused(bridge, "read operation records", `SELECT count(*) FROM catalog.operations WHERE turn_id = $1`, "permission denied")
	refused(bridge, "read registrations", `SELECT count(*) FROM catalog.tools WHERE name = $1`, "permission denied")
	refused(bridge, "drop the leases", `DROP TABLE bridge.leases`, "must be owner")
}
