package server_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/platform/pgdb/pgtest"

	"github.com/sharedos/toolshare/catalog-svc/internal/server"
	"github.com/sharedos/toolshare/catalog-svc/internal/store"
	"github.com/sharedos/toolshare/catalog-svc/internal/store/memory"
	"github.com/sharedos/toolshare/catalog-svc/internal/store/postgres"
	"github.com/sharedos/toolshare/catalog-svc/internal/upstream"
	"github.com/sharedos/toolshare/catalog-svc/migrations"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// backends are the catalogue's stores, each fresh: the embedded one and
// PostgreSQL.
func backends(t *testing.T) []struct {
	name  string
	store store.Store
} {
	dsn := pgtest.NewDatabase(t, migrations.Up)
	return []struct {
		name  string
		store store.Store
	}{{"memory", memory.New()}, {"postgres", postgres.New(pgtest.Pool(t, dsn))}}
}

// serversOver returns the catalogue and upstream servers over st, wired as
// catalog-svc wires them (the upstream manager is the catalogue's
// providers), logging to log.
func serversOver(t *testing.T, st store.Store, log *slog.Logger) (*server.CatalogServer, *server.UpstreamServer) {
	t.Helper()
	svc := startService(t, st, nil)
	m := upstream.New(upstream.Config{Store: st, Registry: svc})
	t.Cleanup(func() { _ = m.Close() })
	return server.NewCatalogServer(svc, m, log), server.NewUpstreamServer(m, log)
}

// A name, URI or namespace no entry or provider can have answers alike on
// both stores: a registration of it InvalidArgument naming the rule it
// breaks, a deregistration or a provider's lookup NotFound, as for a tool;
// never Internal, and nothing is logged as a failure (found by review:
// PostgreSQL refused a NUL in the lookup made before the name, URI or
// namespace was validated, and the call failed as Internal, logged at
// ERROR).
func TestUnregistrableKeysAnswerAlikeOnBothStores(t *testing.T) {
	target := &sharedosv1.HandlerRef{Target: "127.0.0.1:7405"}
	calls := []struct {
		name string
		want codes.Code
		call func(context.Context, *server.CatalogServer, *server.UpstreamServer) error
	}{
		{"RegisterPrompt p\\x00", codes.InvalidArgument, func(ctx context.Context, c *server.CatalogServer, _ *server.UpstreamServer) error {
			_, err := c.RegisterPrompt(ctx, &sharedosv1.RegisterPromptRequest{Registration: &sharedosv1.PromptRegistration{Name: "p\x00", Handler: target}})
			return err
		}},
		{"RegisterPrompt not UTF-8", codes.InvalidArgument, func(ctx context.Context, c *server.CatalogServer, _ *server.UpstreamServer) error {
			_, err := c.RegisterPrompt(ctx, &sharedosv1.RegisterPromptRequest{Registration: &sharedosv1.PromptRegistration{Name: "code.\xff", Handler: target}})
			return err
		}},
		{"DeregisterPrompt p\\x00", codes.NotFound, func(ctx context.Context, c *server.CatalogServer, _ *server.UpstreamServer) error {
			_, err := c.DeregisterPrompt(ctx, &sharedosv1.DeregisterPromptRequest{Name: "p\x00"})
			return err
		}},
		{"RegisterResource NUL", codes.InvalidArgument, func(ctx context.Context, c *server.CatalogServer, _ *server.UpstreamServer) error {
			_, err := c.RegisterResource(ctx, &sharedosv1.RegisterResourceRequest{Registration: &sharedosv1.ResourceRegistration{Uri: "test://a\x00", Name: "n", Handler: target}})
			return err
		}},
		{"RegisterResource not UTF-8", codes.InvalidArgument, func(ctx context.Context, c *server.CatalogServer, _ *server.UpstreamServer) error {
			_, err := c.RegisterResource(ctx, &sharedosv1.RegisterResourceRequest{Registration: &sharedosv1.ResourceRegistration{Uri: "test://a/\xff", Name: "n", Handler: target}})
			return err
		}},
		{"DeregisterResource NUL", codes.NotFound, func(ctx context.Context, c *server.CatalogServer, _ *server.UpstreamServer) error {
			_, err := c.DeregisterResource(ctx, &sharedosv1.DeregisterResourceRequest{Uri: "test://a\x00"})
			return err
		}},
		// The providers API's lookups of a provider by namespace.
		{"GetProvider", codes.NotFound, func(ctx context.Context, _ *server.CatalogServer, u *server.UpstreamServer) error {
			_, err := u.GetProvider(ctx, &sharedosv1.GetProviderRequest{Namespace: "g\x00"})
			return err
		}},
		{"GetProvider not UTF-8", codes.NotFound, func(ctx context.Context, _ *server.CatalogServer, u *server.UpstreamServer) error {
			_, err := u.GetProvider(ctx, &sharedosv1.GetProviderRequest{Namespace: "g\xff"})
			return err
		}},
		{"RefreshProvider", codes.NotFound, func(ctx context.Context, _ *server.CatalogServer, u *server.UpstreamServer) error {
			_, err := u.RefreshProvider(ctx, &sharedosv1.RefreshProviderRequest{Namespace: "g\x00"})
			return err
		}},
		{"RemoveProvider", codes.NotFound, func(ctx context.Context, _ *server.CatalogServer, u *server.UpstreamServer) error {
			_, err := u.RemoveProvider(ctx, &sharedosv1.RemoveProviderRequest{Namespace: "g\x00"})
			return err
		}},
		{"ApproveTool", codes.NotFound, func(ctx context.Context, _ *server.CatalogServer, u *server.UpstreamServer) error {
			_, err := u.ApproveTool(ctx, &sharedosv1.ApproveToolRequest{Name: "g\x00.x", Digest: "d"})
			return err
		}},
		{"RejectTool", codes.NotFound, func(ctx context.Context, _ *server.CatalogServer, u *server.UpstreamServer) error {
			_, err := u.RejectTool(ctx, &sharedosv1.RejectToolRequest{Name: "g\x00.x", Digest: "d"})
			return err
		}},
		{"DiffTool", codes.NotFound, func(ctx context.Context, _ *server.CatalogServer, u *server.UpstreamServer) error {
			_, err := u.DiffTool(ctx, &sharedosv1.DiffToolRequest{Name: "g\x00.x"})
			return err
		}},
	}
	answers := map[string]codes.Code{}
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			logged := &syncWriter{w: &strings.Builder{}}
			c, u := serversOver(t, b.store, slog.New(slog.NewTextHandler(logged, nil)))
			ctx := t.Context()
			for _, call := range calls {
				err := call.call(ctx, c, u)
				if got := status.Code(err); got != call.want {
					t.Errorf("%s: %v, want %s", call.name, err, call.want)
				}
				if first, ok := answers[call.name]; ok && first != status.Code(err) {
					t.Errorf("%s: %s here, %s on the other store", call.name, status.Code(err), first)
				}
				answers[call.name] = status.Code(err)
			}
			if strings.Contains(logged.w.String(), "level=ERROR") {
				t.Errorf("a malformed name or URI was logged as a failure:\n%s", logged.w.String())
			}
		})
	}
}
