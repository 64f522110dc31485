// Package migrations holds bridge-svc's PostgreSQL schema (schema "bridge") as
// goose SQL migrations embedded in the binary. They are applied by
// `bridge-svc migrate` (and by `serve --migrate` for local use), never
// implicitly by serve: in production a Helm hook Job runs them once.
package migrations
