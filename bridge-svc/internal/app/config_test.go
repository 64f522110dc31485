package app_test

import (
	"context"
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/sharedos/toolshare/bridge-svc/internal/app"
)

// TestCompleteRefusesBadConfig: each bad setting is refused before anything
// listens, with an error naming the flag.
func TestCompleteRefusesBadConfig(t *testing.T) {
	good := func() app.Config {
		return app.Config{
			Listen: "127.0.0.1:0", HTTPListen: "127.0.0.1:0", Catalog: "127.0.0.1:1",
			MaxBodyBytes: 1024, DefaultTTL: time.Minute,
		}
	}
	cases := []struct {
		name string
		edit func(*app.Config)
		flag string
	}{
		{"no listen", func(c *app.Config) { c.Listen = "" }, "--listen"},
		{"bad listen", func(c *app.Config) { c.Listen = "nope:-1" }, "--listen"},
		{"bad http listen", func(c *app.Config) { c.HTTPListen = "nope:-1" }, "--http-listen"},
		{"zero body cap", func(c *app.Config) { c.MaxBodyBytes = 0 }, "--max-body-bytes"},
		{"body cap over what the kernel takes", func(c *app.Config) { c.MaxBodyBytes = 33 << 20 }, "--max-body-bytes"},
		{"negative connection bound", func(c *app.Config) { c.MaxConnections = -1 }, "--max-connections"},
		{"ttl over max", func(c *app.Config) { c.DefaultTTL = 48 * time.Hour }, "--default-ttl"},
		{"negative lease retention", func(c *app.Config) { c.LeaseRetention = -time.Hour }, "--lease-retention"},
		{"origin with path", func(c *app.Config) { c.AllowedOrigins = []string{"https://app.example/x"} }, "--allowed-origins"},
		{"origin without scheme", func(c *app.Config) { c.AllowedOrigins = []string{"app.example"} }, "--allowed-origins"},
		{"trusted proxy not a CIDR", func(c *app.Config) { c.TrustedProxies = []string{"10.0.0.0/33"} }, "--trusted-proxies"},
		{"public url not http", func(c *app.Config) { c.PublicURL = "ftp://x" }, "--public-url"},
		{"public url with a wildcard host", func(c *app.Config) { c.PublicURL = "https://*.example.com" }, "--public-url"},
		{"public url with credentials", func(c *app.Config) { c.PublicURL = "https://u:p@tools.example.com" }, "--public-url"},
		{"public url with a query", func(c *app.Config) { c.PublicURL = "https://tools.example.com/?x=1" }, "--public-url"},
		{"public url with a fragment", func(c *app.Config) { c.PublicURL = "https://tools.example.com/#x" }, "--public-url"},
		{"host tenants without a host identity", func(c *app.Config) {
			c.HostTenants = []string{"spiffe://sharedos.local/bridge/b=acme"}
		}, "--host-tenants"},
		{"host tenants without a tenant", func(c *app.Config) { c.HostTenants = []string{"spiffe://sharedos.local/host/h"} }, "--host-tenants"},
		{"oidc audience without issuer", func(c *app.Config) { c.OIDCAudience = "x" }, "--oidc-issuer"},
		{"oidc issuer without audience", func(c *app.Config) { c.OIDCIssuer = "https://idp.example" }, "--oidc-audience"},
		{"oidc issuer over plain HTTP", func(c *app.Config) { c.OIDCIssuer, c.OIDCAudience = "http://idp.example", "a" }, "--oidc-issuer"},
		{"oidc HMAC", func(c *app.Config) {
			c.OIDCIssuer, c.OIDCAudience, c.OIDCAlgorithms = "https://idp.example", "x", []string{"HS256"}
		}, "--oidc-algorithms"},
		{"database unreachable", func(c *app.Config) {
			c.DatabaseURL = "postgres://postgres@127.0.0.1:1/x?sslmode=disable&connect_timeout=1"
		}, "--database-url"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := good()
			tc.edit(&c)
			a, err := c.Complete(context.Background())
			if err == nil {
				t.Fatalf("Complete accepted %+v (%v)", c, a)
			}
			if !strings.Contains(err.Error(), tc.flag) {
				t.Errorf("error %q does not name %s", err, tc.flag)
			}
		})
	}
}

// --allowed-origin is --allowed-origins spelled as issue 17 writes it:
// either, given once or more, adds to the one list.
func TestAllowedOriginSpellings(t *testing.T) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	cfg := app.Bind(fs)
	if err := fs.Parse([]string{"--allowed-origin", "https://a.example", "--allowed-origins", "https://b.example,https://c.example",
		"--allowed-origin", "https://d.example"}); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(cfg().AllowedOrigins, " ")
	if got != "https://a.example https://b.example https://c.example https://d.example" {
		t.Errorf("allowed origins %q", got)
	}
}
