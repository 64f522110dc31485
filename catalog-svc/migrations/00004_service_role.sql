-- +goose Up
-- Least privilege (ADR 0013). Migrations run as the owner of the schema;
-- catalog-svc runs as sharedos_catalog (its pool sets ROLE at connect,
-- --database-role), which may read and write registrations but may only
-- INSERT operation records and UPDATE their outcome columns: it cannot
-- disable the append-only triggers (not the owner), truncate, delete, or
-- rewrite a finished record, and has no privilege on the bridge's schema.
-- The role is cluster-wide and NOLOGIN: a service's login user is granted
-- membership (GRANT sharedos_catalog TO <user>), or is the owner, which
-- then steps down to it.
-- +goose StatementBegin
DO $$
BEGIN
    CREATE ROLE sharedos_catalog NOLOGIN;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    NULL; -- made by another database's migration, or a concurrent one (which PostgreSQL reports as a unique_violation)
END
$$;
-- +goose StatementEnd
GRANT USAGE ON SCHEMA catalog TO sharedos_catalog;
GRANT SELECT, INSERT, UPDATE, DELETE ON catalog.tools TO sharedos_catalog;
GRANT SELECT, INSERT ON catalog.operations TO sharedos_catalog;
GRANT UPDATE (resolved_tool, decision_id, policy_revision, status, code, reason, finished_at)
    ON catalog.operations TO sharedos_catalog;
GRANT USAGE ON SEQUENCE catalog.operations_sequence_seq TO sharedos_catalog;
GRANT SELECT ON catalog_goose_db_version TO sharedos_catalog;

-- +goose Down
REVOKE ALL ON catalog_goose_db_version FROM sharedos_catalog;
REVOKE ALL ON SEQUENCE catalog.operations_sequence_seq FROM sharedos_catalog;
REVOKE ALL ON catalog.operations FROM sharedos_catalog;
REVOKE ALL ON catalog.tools FROM sharedos_catalog;
REVOKE ALL ON SCHEMA catalog FROM sharedos_catalog;
