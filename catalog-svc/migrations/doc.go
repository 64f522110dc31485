// Package migrations holds catalog-svc's PostgreSQL schema (schema "catalog") as
// goose SQL migrations embedded in the binary. They are applied by
// `catalog-svc migrate` (and by `serve --migrate` for local use), never
// implicitly by serve: in production a Helm hook Job runs them once.
package migrations
