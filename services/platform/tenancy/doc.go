// Package tenancy binds host identities to the tenants they act for: which
// tenants a host may open turns for (bridge-svc) and whose turns and
// records it may read and close (bridge-svc, catalog-svc). Both services
// read the same --host-tenants entries. Operators act for every tenant; in
// plaintext (no identities, loopback only) every caller is trusted.
package tenancy
