-- +goose Up
-- Least privilege (ADR 0013): bridge-svc runs as sharedos_bridge (its pool
-- sets ROLE at connect, --database-role), which touches only bridge.leases;
-- it has no privilege on the catalog schema, so the internet-facing bridge
-- cannot read or write registrations or operation records. The role is
-- cluster-wide and NOLOGIN (see catalog-svc's 00004).
-- +goose StatementBegin
DO $$
BEGIN
    CREATE ROLE sharedos_bridge NOLOGIN;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    NULL;
END
$$;
-- +goose StatementEnd
GRANT USAGE ON SCHEMA bridge TO sharedos_bridge;
GRANT SELECT, INSERT, UPDATE, DELETE ON bridge.leases TO sharedos_bridge;
GRANT SELECT ON bridge_goose_db_version TO sharedos_bridge;

-- +goose Down
REVOKE ALL ON bridge_goose_db_version FROM sharedos_bridge;
REVOKE ALL ON bridge.leases FROM sharedos_bridge;
REVOKE ALL ON SCHEMA bridge FROM sharedos_bridge;
