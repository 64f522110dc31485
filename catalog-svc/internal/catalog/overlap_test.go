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

// intricate is one of the templates of attack run C3: two {var}s around
// 1,900 bytes of one letter, each pair of them a walk of the comparison's
// whole bound (an upstream listed 30 to 60 of them).
func intricate(i int) string {
	q := strings.Repeat("q", 950)
	return fmt.Sprintf("evil://a/{x}%s%03d%s{y}/z", q, i, q)
}

// TestOneSourcesOwnResourcesAreNotCompared (attack run C3: an upstream
// listing N intricate templates made a refresh take minutes — N=30, 95 s
// of CPU; N=60, 276 s — since each of its new resources was compared with
// every registration, its own included, before the source was looked at,
// each pair the walk's whole bound, twice): a source's own registrations
// cost its checks nothing — only another source's are compared (here one,
// ended at once by its other scheme: one unit of work).
func TestOneSourcesOwnResourcesAreNotCompared(t *testing.T) {
	svc := newService(t, nil, nil)
	ctx := testCtx(t)
	if _, _, err := svc.RegisterResource(ctx, resourceOf("users://{id}/profile", "op")); err != nil {
		t.Fatal(err)
	}
	var checks, work int
	svc.OnCheckedOverlap(func(n int) { checks, work = checks+1, work+n })
	const n = 12
	for i := range n {
		r := resourceOf(intricate(i), "mcp:evil")
		if err := svc.CheckResourceOverlap(ctx, r); err != nil {
			t.Fatalf("%d: advisory check: %v", i, err)
		}
		if _, _, err := svc.RegisterResource(ctx, r); err != nil {
			t.Fatalf("%d: %v", i, err)
		}
	}
	if checks != 2*n || work > 2*n {
		t.Errorf("%d checks did %d units of work; want %d doing one each (the other source's template)", checks, work, 2*n)
	}
}

// TestResourceOverlapChecksAreBounded (attack run C3): the comparisons of
// one check are bounded (catalog.MaxOverlapWork) and so are a refresh's,
// shared by every check made with its context (WithOverlapBudget); a
// registration the comparisons cannot tell apart from another source's
// within the bound is refused, as an overlap, naming the bound, and one
// that needs no comparison is not.
func TestResourceOverlapChecksAreBounded(t *testing.T) {
	svc := newService(t, nil, nil)
	ctx := testCtx(t)
	var work []int
	svc.OnCheckedOverlap(func(n int) { work = append(work, n) })
	refused := func(err error, says string) {
		t.Helper()
		var v *catalog.ValidationError
		if !errors.As(err, &v) || v.Field != "uri" || v.Rule != catalog.RuleResourceOverlap || !strings.Contains(v.Detail, says) {
			t.Errorf("%v; want uri violating %s saying %q", err, catalog.RuleResourceOverlap, says)
		}
	}
	// Templates of one source that another's is told apart from only by
	// walking each pair to its end (about 47,000 states, no overlap: one
	// more '/' than it), more than one check may walk.
	q := strings.Repeat("q", 150)
	for i := range 30 {
		if _, _, err := svc.RegisterResource(ctx, resourceOf(fmt.Sprintf("e://h/{w}%s/{v}/i%d/z", q, i), "mcp:a")); err != nil {
			t.Fatal(err)
		}
	}
	work = nil
	_, _, err := svc.RegisterResource(ctx, resourceOf("e://h/{x}"+q+"{y}/z", "mcp:b"))
	refused(err, "too intricate to tell apart")
	if len(work) != 1 || work[0] != catalog.MaxOverlapWork+1 {
		t.Errorf("the check did %v units of work; want it stopped past %d", work, catalog.MaxOverlapWork)
	}
	// A refresh's budget is shared by its checks, advisory and not.
	refresh := catalog.WithOverlapBudget(ctx, 5000)
	err = svc.CheckResourceOverlap(refresh, resourceOf("file:///srv/{path}", "mcp:b"))
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = svc.RegisterResource(refresh, resourceOf("e://h/{a}"+q+"{b}/z", "mcp:b"))
	refused(err, "this refresh's comparisons reached their bound")
	_, _, err = svc.RegisterResource(refresh, resourceOf("e://h/{c}"+q+"{d}/z", "mcp:b"))
	refused(err, "this refresh's comparisons reached their bound")
	// One that needs no comparison with another source's is not refused,
	// and another context has its own bound.
	if _, _, err := svc.RegisterResource(refresh, resourceOf("e://h/{w}"+q+"/{v}/i99/z", "mcp:a")); err != nil {
		t.Errorf("a source's own, in a spent refresh: %v", err)
	}
	if _, _, err := svc.RegisterResource(ctx, resourceOf("file:///srv/{path}", "mcp:b")); err != nil {
		t.Errorf("outside the refresh: %v", err)
	}
	total := 0
	for _, n := range work[1:5] {
		total += n
	}
	if len(work) != 6 || total > 5000+2 {
		t.Errorf("the refresh's checks did %v units of work; want at most its 5,000 (and the step of each refused one that passed it)", work[1:5])
	}
}
