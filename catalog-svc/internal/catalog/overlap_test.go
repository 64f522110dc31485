package catalog_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/resourceuri"
	"github.com/sharedos/toolshare/services/platform/pgdb"
	"github.com/sharedos/toolshare/services/platform/pgdb/pgtest"

	"github.com/sharedos/toolshare/catalog-svc/internal/catalog"
	"github.com/sharedos/toolshare/catalog-svc/internal/store"
	"github.com/sharedos/toolshare/catalog-svc/internal/store/memory"
	"github.com/sharedos/toolshare/catalog-svc/internal/store/postgres"
	"github.com/sharedos/toolshare/catalog-svc/migrations"
)

// overlapStores runs f on a catalogue over each store: memory (one
// process: replica is its one Service), and PostgreSQL with the advisory
// locks catalog-svc takes there (replica: another catalog-svc over the
// same database).
func overlapStores(t *testing.T, f func(t *testing.T, st store.Store, replica func() *catalog.Service)) {
	t.Run("memory", func(t *testing.T) {
		st := memory.New()
		svc := newService(t, st, nil)
		f(t, st, func() *catalog.Service { return svc })
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := pgtest.NewDatabase(t, migrations.Up)
		replica := func() (*catalog.Service, store.Store) {
			pool := openPool(t, dsn)
			locks := pgdb.NewLocks(pool, "sharedos.resources", nil)
			t.Cleanup(func() { _ = locks.Close() })
			st := postgres.New(pool)
			svc, err := catalog.New(catalog.Config{Store: st, Locks: locks})
			if err != nil {
				t.Fatal(err)
			}
			if err := svc.Start(testCtx(t)); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = svc.Close() })
			return svc, st
		}
		_, st := replica()
		f(t, st, func() *catalog.Service { svc, _ := replica(); return svc })
	})
}

func resourceOf(uri, source string) *sharedosv1.ResourceRegistration {
	r := resource(uri)
	r.Metadata.Source = source
	return r
}

// The reproduction (found by review): provider e5 has the template
// users://{id}/profile; e4, added later, registered users://alice/{p},
// the concrete users://bob/profile and the catch-all {s}://{h}/{p}, and
// took every read of alice's and bob's profiles and of any three-segment
// URI no other template matched (Match: an exact URI first, else the first
// template in byte order). Each is refused now, naming the field, the
// rule and e5's template; what one source registers inside its own
// template, and what overlaps no other source's, still lands; so reads of
// the profiles go to e5. An entry stored before the rule stays served.
func TestResourceOverlapAcrossSources(t *testing.T) {
	overlapStores(t, func(t *testing.T, st store.Store, replica func() *catalog.Service) {
		svc := replica()
		ctx := testCtx(t)
		const e4, e5 = "mcp:e4", "mcp:e5"
		if _, _, err := svc.RegisterResource(ctx, resourceOf("users://{id}/profile", e5)); err != nil {
			t.Fatal(err)
		}
		refused := func(uri, source, overlapped string) {
			t.Helper()
			_, _, err := svc.RegisterResource(ctx, resourceOf(uri, source))
			var v *catalog.ValidationError
			if !errors.As(err, &v) || v.Field != "uri" || v.Rule != catalog.RuleResourceOverlap ||
				!strings.Contains(v.Detail, fmt.Sprintf("%q", overlapped)) {
				t.Errorf("%s by %s: %v; want uri violating %s, naming %q", uri, source, err, catalog.RuleResourceOverlap, overlapped)
			}
			if _, err := svc.ResolveResource(ctx, uri); !errors.Is(err, catalog.ErrNotFound) {
				t.Errorf("%s by %s was stored: %v", uri, source, err)
			}
		}
		landed := func(uri, source string) {
			t.Helper()
			if _, _, err := svc.RegisterResource(ctx, resourceOf(uri, source)); err != nil {
				t.Errorf("%s by %s: %v", uri, source, err)
			}
		}
		refused("users://alice/{p}", e4, "users://{id}/profile")
		refused("users://bob/profile", e4, "users://{id}/profile")
		refused("{s}://{h}/{p}", e4, "users://{id}/profile")
		// ... nor in another spelling a reader takes for the same URI.
		refused("USERS://alice/{p}", e4, "users://{id}/profile")
		refused("users://BOB/{p}", e4, "users://{id}/profile")

		// One source's own overlaps, and what overlaps no other source's.
		landed("users://carol/profile", e5)
		landed("users://{id}/settings", e4)
		landed("notes://shared/readme", e4)
		landed("notes://{h}/{p}", e4)
		landed("users://{id}/profile", e5) // registered again: replaced, not overlapped
		// The other way round: e5 may not reach into e4's, and a
		// catch-all is refused while any other source's entry matches it.
		refused("notes://shared/{x}", e5, "notes://shared/readme")
		refused("{s}://{h}/{p}", e5, "notes://shared/readme")
		refused("users://dave/settings", e5, "users://{id}/settings")

		// Reads go where the reproduction expected: e5's template and URI.
		regs, err := svc.ResourceRegistrations(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var uris []string
		for _, r := range regs {
			uris = append(uris, r.GetUri())
		}
		for read, want := range map[string]string{
			"users://alice/profile": "users://{id}/profile",
			"users://bob/profile":   "users://{id}/profile",
			"users://carol/profile": "users://carol/profile",
			"zzz://a/b":             "",
		} {
			if got, _ := resourceuri.Match(uris, read); got != want {
				t.Errorf("a read of %s goes to %q; want %q", read, got, want)
			}
		}

		// Stored before the rule (as an older kernel stored it): served
		// still, and it does not stop its own source's registrations.
		legacy := resourceOf("{s}://{h}/{p}", e4)
		b, err := proto.Marshal(legacy)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.PutEntry(ctx, store.KindResource, store.Entry{Key: legacy.GetUri(), Registration: b, Canonical: []byte("{}"), Digest: "d"}); err != nil {
			t.Fatal(err)
		}
		if r, err := svc.ResolveResource(ctx, legacy.GetUri()); err != nil || r.Resource.GetMetadata().GetSource() != e4 {
			t.Errorf("the entry stored before the rule: %v, %v", r, err)
		}
		landed("notes://other/readme", e4)
		refused("users://erin/profile", e4, "users://{id}/profile")
	})
}

// Two sources register overlapping templates at the same moment, on one
// replica or on two: exactly one lands (the checks and the write are one
// step under the resources' lock).
func TestResourceOverlapsRegisteredAtOnce(t *testing.T) {
	overlapStores(t, func(t *testing.T, _ store.Store, replica func() *catalog.Service) {
		registerPairsAtOnce(t, replica(), replica(), 40, "two overlapping templates", func(i int) (*sharedosv1.ResourceRegistration, *sharedosv1.ResourceRegistration) {
			return resourceOf(fmt.Sprintf("race%d://{id}/profile", i), "mcp:e5"), resourceOf(fmt.Sprintf("race%d://alice/{p}", i), "mcp:e4")
		})
	})
}
