package storetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"

	"github.com/sharedos/toolshare/catalog-svc/internal/store"
)

// Run runs the suite. newStores returns, for one subtest, an empty store
// and another replica over the same data (the same value where the backend
// has no other: one process's memory).
func Run(t *testing.T, newStores func(t *testing.T) (s, replica store.Store)) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s, replica store.Store)
	}{
		{"CreateGet", testCreateGet},
		{"VerbatimJSON", testVerbatimJSON},
		{"AuthorityRoundTrip", testAuthorityRoundTrip},
		{"Duplicate", testDuplicate},
		{"CollisionKey", testCollisionKey},
		{"CaseInsensitive", testCaseInsensitive},
		{"ConcurrentCollidingCreates", testConcurrentCollidingCreates},
		{"Update", testUpdate},
		{"UpdateConditional", testUpdateConditional},
		{"UpdateMissing", testUpdateMissing},
		{"Delete", testDelete},
		{"RecreateNeverRepeatsARevision", testRecreateNeverRepeatsARevision},
		{"ListPaging", testListPaging},
		{"Batch", testBatch},
		{"BatchAllOrNothing", testBatchAllOrNothing},
		{"BatchFirstOffender", testBatchFirstOffender},
		{"WatchSeesEveryWrite", testWatch},
		{"WatchStopsWithContext", testWatchStops},
		{"EntriesPutReplaceDelete", testEntries},
		{"EntriesKindsApart", testEntriesKinds},
		{"EntriesMatchKeys", testEntriesMatchKeys},
		{"EntriesKeyLength", testEntriesKeyLength},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, replica := newStores(t)
			tc.fn(t, s, replica)
		})
	}
}

// Record returns a stored-shape record for name, for tests of other
// packages too. The JSON has whitespace and unsorted keys on purpose.
func Record(name string) store.Record {
	ns, _, _ := strings.Cut(name, ".")
	canonical := []byte(fmt.Sprintf(`{"inputSchema":{"type":"object"},"name":%q}`, name))
	sum := sha256.Sum256(canonical)
	return store.Record{
		Registration: &sharedosv1.ToolRegistration{
			Name:            name,
			Description:     "Tool " + name + ".\nSecond line.",
			InputSchemaJson: []byte(`{ "type": "object",  "properties": {"z": {"type":"string"}, "a": {"type": "integer"}} }`),
			Metadata:        &sharedosv1.ToolMetadata{Namespace: ns, Source: "test"},
			Class:           sharedosv1.ToolClass_TOOL_CLASS_MANAGED,
			Requirement:     &sharedosv1.Requirement{Action: "read", Resource: "thing:{z}"},
			Handler:         &sharedosv1.HandlerRef{Target: "127.0.0.1:7404"},
		},
		Canonical: canonical,
		Digest:    hex.EncodeToString(sum[:]),
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func mustCreate(t *testing.T, s store.Store, rec store.Record) store.Record {
	t.Helper()
	out, err := s.Create(ctx(t), rec)
	if err != nil {
		t.Fatalf("Create(%q): %v", rec.Name(), err)
	}
	return out
}

// sameRegistration compares everything the caller sets (not the store's
// revision and timestamps).
func sameRegistration(t *testing.T, got, want store.Record) {
	t.Helper()
	g := proto.Clone(got.Registration).(*sharedosv1.ToolRegistration)
	g.Revision, g.CreatedAt, g.UpdatedAt = 0, nil, nil
	if !proto.Equal(g, want.Registration) {
		t.Errorf("registration\n got %v\nwant %v", g, want.Registration)
	}
	if string(got.Canonical) != string(want.Canonical) || got.Digest != want.Digest {
		t.Errorf("canonical/digest = %q/%s, want %q/%s", got.Canonical, got.Digest, want.Canonical, want.Digest)
	}
}

func testCreateGet(t *testing.T, s, _ store.Store) {
	rec := Record("files.read")
	// Every authority field is kept, the flags included.
	rec.Registration.ReadOnly = true
	rec.Registration.Requirement.OpenArguments = true
	out := mustCreate(t, s, rec)
	sameRegistration(t, out, rec)
	if r := out.Registration; r.GetRevision() != 1 || r.GetCreatedAt() == nil || !proto.Equal(r.GetCreatedAt(), r.GetUpdatedAt()) {
		t.Errorf("stored revision/created/updated = %d/%v/%v, want 1 and equal timestamps", r.GetRevision(), r.GetCreatedAt(), r.GetUpdatedAt())
	}
	got, err := s.Get(ctx(t), "files.read")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	sameRegistration(t, got, rec)
	if !proto.Equal(got.Registration, out.Registration) {
		t.Errorf("Get = %v, want what Create returned %v", got.Registration, out.Registration)
	}
	for _, name := range []string{"files.reads", "FILES.READ", "files_read", ""} {
		if _, err := s.Get(ctx(t), name); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Get(%q) error = %v, want ErrNotFound", name, err)
		}
	}
	// The caller's message is not aliased.
	rec.Registration.Description = "mutated"
	if got, _ := s.Get(ctx(t), "files.read"); got.Registration.GetDescription() == "mutated" {
		t.Error("store aliases the caller's registration")
	}
}

func testVerbatimJSON(t *testing.T, s, _ store.Store) {
	rec := Record("json.verbatim")
	rec.Registration.InputSchemaJson = []byte("{\n  \"type\" : \"object\",\n  \"properties\": {\"b\": {}, \"a\": {\"description\": \"é <&> \\u00e9\"}},\n  \"x-n\": 1.50\n}")
	rec.Registration.OutputSchemaJson = []byte(`{"type":"object","required":["z","a"]}`)
	rec.Registration.AnnotationsJson = []byte(`{"title":"T", "readOnlyHint":true}`)
	mustCreate(t, s, rec)
	got, err := s.Get(ctx(t), rec.Name())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ field, got, want string }{
		{"input", string(got.Registration.GetInputSchemaJson()), string(rec.Registration.InputSchemaJson)},
		{"output", string(got.Registration.GetOutputSchemaJson()), string(rec.Registration.OutputSchemaJson)},
		{"annotations", string(got.Registration.GetAnnotationsJson()), string(rec.Registration.AnnotationsJson)},
	} {
		if c.got != c.want {
			t.Errorf("%s JSON not verbatim:\n got %q\nwant %q", c.field, c.got, c.want)
		}
	}
	// Absent JSON stays absent.
	bare := Record("json.bare")
	mustCreate(t, s, bare)
	got, _ = s.Get(ctx(t), "json.bare")
	if got.Registration.GetOutputSchemaJson() != nil || got.Registration.GetAnnotationsJson() != nil {
		t.Errorf("absent JSON came back as %q / %q", got.Registration.GetOutputSchemaJson(), got.Registration.GetAnnotationsJson())
	}
}

func testAuthorityRoundTrip(t *testing.T, s, _ store.Store) {
	rec := Record("files.write")
	rec.Registration.Requirement = &sharedosv1.Requirement{Action: "write", Resource: "file:{z}", PathCleaning: sharedosv1.PathCleaning_PATH_CLEANING_POSIX}
	rec.Registration.Handler = &sharedosv1.HandlerRef{Target: "dns:///files:7404", Timeout: durationpb.New(1500 * time.Millisecond)}
	rec.Registration.CredentialRef = "secret/files"
	mustCreate(t, s, rec)
	local := Record("patch")
	local.Registration.Class = sharedosv1.ToolClass_TOOL_CLASS_HARNESS_LOCAL
	local.Registration.Metadata = nil
	local.Registration.Requirement = nil
	local.Registration.Handler = nil
	mustCreate(t, s, local)
	for _, want := range []store.Record{rec, local} {
		got, err := s.Get(ctx(t), want.Name())
		if err != nil {
			t.Fatal(err)
		}
		sameRegistration(t, got, want)
	}
}

func testDuplicate(t *testing.T, s, _ store.Store) {
	mustCreate(t, s, Record("files.read"))
	dup := Record("files.read")
	dup.Registration.Description = "second"
	if _, err := s.Create(ctx(t), dup); !errors.Is(err, store.ErrAlreadyExists) {
		t.Fatalf("duplicate Create error = %v, want ErrAlreadyExists", err)
	}
	got, _ := s.Get(ctx(t), "files.read")
	if got.Registration.GetDescription() == "second" || got.Registration.GetRevision() != 1 {
		t.Errorf("duplicate Create changed the stored tool: %v", got.Registration)
	}
}

func wantConflict(t *testing.T, err error, rule, existing string) {
	t.Helper()
	var ce *store.ConflictError
	if !errors.As(err, &ce) || !errors.Is(err, store.ErrConflict) {
		t.Fatalf("error = %v, want *ConflictError", err)
	}
	if ce.Rule != rule || ce.Existing != existing {
		t.Errorf("conflict = %+v, want rule %s with existing %q", ce, rule, existing)
	}
}

func testCollisionKey(t *testing.T, s, _ store.Store) {
	mustCreate(t, s, Record("files.read"))
	for _, name := range []string{"files_read", "files-read"} {
		_, err := s.Create(ctx(t), Record(name))
		wantConflict(t, err, store.RuleCollisionKey, "files.read")
	}
	// Different keys are fine.
	mustCreate(t, s, Record("files.reads"))
}

func testCaseInsensitive(t *testing.T, s, _ store.Store) {
	mustCreate(t, s, Record("github.search"))
	for _, name := range []string{"GitHub.search", "GITHUB.SEARCH"} {
		_, err := s.Create(ctx(t), Record(name))
		wantConflict(t, err, store.RuleCaseInsensitive, "github.search")
	}
}

func testConcurrentCollidingCreates(t *testing.T, s, _ store.Store) {
	names := []string{"files.read", "files_read", "files-read", "FILES.read", "files.READ", "Files_Read", "files.read", "files-READ", "FILES-READ"}
	var wg sync.WaitGroup
	errs := make([]error, len(names))
	start := make(chan struct{})
	for i, n := range names {
		wg.Go(func() {
			<-start
			_, errs[i] = s.Create(ctx(t), Record(n))
		})
	}
	close(start)
	wg.Wait()
	ok := 0
	for i, err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, store.ErrAlreadyExists) || errors.Is(err, store.ErrConflict):
		default:
			t.Errorf("Create(%q): unexpected error %v", names[i], err)
		}
	}
	if ok != 1 {
		t.Fatalf("%d of %d colliding creates succeeded, want exactly 1 (errors %v)", ok, len(names), errs)
	}
	all, err := s.Snapshot(ctx(t))
	if err != nil || len(all) != 1 {
		t.Fatalf("Snapshot = %d records, %v; want 1", len(all), err)
	}
}

func testUpdate(t *testing.T, s, _ store.Store) {
	created := mustCreate(t, s, Record("files.read"))
	upd := Record("files.read")
	upd.Registration.Description = "updated"
	upd.Registration.OutputSchemaJson = []byte(`{"type":"object"}`)
	upd.Canonical = []byte(`{"updated":true}`)
	upd.Digest = "d2"
	out, err := s.Update(ctx(t), upd, 0)
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	sameRegistration(t, out, upd)
	if out.Registration.GetRevision() != 2 {
		t.Errorf("revision after one update = %d, want 2", out.Registration.GetRevision())
	}
	if !proto.Equal(out.Registration.GetCreatedAt(), created.Registration.GetCreatedAt()) {
		t.Errorf("created_at changed: %v → %v", created.Registration.GetCreatedAt(), out.Registration.GetCreatedAt())
	}
	if out.Registration.GetUpdatedAt().AsTime().Before(created.Registration.GetUpdatedAt().AsTime()) {
		t.Errorf("updated_at went backwards")
	}
	got, _ := s.Get(ctx(t), "files.read")
	sameRegistration(t, got, upd)
	if out, err = s.Update(ctx(t), upd, 0); err != nil || out.Registration.GetRevision() != 3 {
		t.Fatalf("second Update = rev %d, %v; want 3", out.Registration.GetRevision(), err)
	}
}

func testUpdateConditional(t *testing.T, s, _ store.Store) {
	mustCreate(t, s, Record("files.read"))
	upd := Record("files.read")
	upd.Registration.Description = "v2"
	if _, err := s.Update(ctx(t), upd, 7); !errors.Is(err, store.ErrRevisionMismatch) {
		t.Fatalf("Update with stale revision error = %v, want ErrRevisionMismatch", err)
	}
	got, _ := s.Get(ctx(t), "files.read")
	if got.Registration.GetRevision() != 1 || got.Registration.GetDescription() == "v2" {
		t.Fatalf("failed conditional update changed the tool: %v", got.Registration)
	}
	out, err := s.Update(ctx(t), upd, 1)
	if err != nil || out.Registration.GetRevision() != 2 {
		t.Fatalf("Update with current revision = %v, %v; want revision 2", out.Registration, err)
	}
}

func testUpdateMissing(t *testing.T, s, _ store.Store) {
	if _, err := s.Update(ctx(t), Record("files.read"), 0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Update of missing tool error = %v, want ErrNotFound", err)
	}
	if _, err := s.Update(ctx(t), Record("files.read"), 3); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("conditional Update of missing tool error = %v, want ErrNotFound", err)
	}
}

func testDelete(t *testing.T, s, _ store.Store) {
	mustCreate(t, s, Record("files.read"))
	if err := s.Delete(ctx(t), "files.read"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := s.Get(ctx(t), "files.read"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get after Delete error = %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx(t), "files.read"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("second Delete error = %v, want ErrNotFound", err)
	}
	// The uniqueness slots are released with the tool.
	out := mustCreate(t, s, Record("Files_Read"))
	if out.Registration.GetRevision() != 1 {
		t.Errorf("re-created tool revision = %d, want 1", out.Registration.GetRevision())
	}
}

// revisionOf is name's stored revision.
func revisionOf(t *testing.T, s store.Store, name string) int64 {
	t.Helper()
	got, err := s.Get(ctx(t), name)
	if err != nil {
		t.Fatalf("Get(%q): %v", name, err)
	}
	return got.Registration.GetRevision()
}

// staleUpdatesFail checks that an update prepared against any of name's
// revisions in stale fails and leaves the tool as it is.
func staleUpdatesFail(t *testing.T, s store.Store, name string, stale ...int64) {
	t.Helper()
	before, err := s.Get(ctx(t), name)
	if err != nil {
		t.Fatalf("Get(%q): %v", name, err)
	}
	upd := Record(name)
	upd.Registration.Description = "stale write"
	for _, rev := range stale {
		if _, err := s.Update(ctx(t), upd, rev); !errors.Is(err, store.ErrRevisionMismatch) {
			t.Errorf("Update(%q) expecting revision %d of its deleted predecessor: error %v, want ErrRevisionMismatch", name, rev, err)
		}
	}
	after, _ := s.Get(ctx(t), name)
	if !proto.Equal(after.Registration, before.Registration) {
		t.Errorf("a stale update changed %q: %v → %v", name, before.Registration, after.Registration)
	}
}

// A tool deleted and registered again under its name continues from its
// predecessor's last revision, through Create and CreateBatch alike and
// whichever replica writes: an update prepared against the old tool
// (expected_revision 1 or 2) must not land on the new one (ABA). A name
// never seen still starts at 1.
func testRecreateNeverRepeatsARevision(t *testing.T, s, replica store.Store) {
	mustCreate(t, s, Record("files.read"))
	if _, err := s.Update(ctx(t), Record("files.read"), 1); err != nil {
		t.Fatalf("Update: %v", err)
	}
	if err := s.Delete(ctx(t), "files.read"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	// Re-created through the other replica.
	if out := mustCreate(t, replica, Record("files.read")); out.Registration.GetRevision() != 3 {
		t.Errorf("re-created tool's revision = %d, want 3 (its predecessor ended at 2)", out.Registration.GetRevision())
	}
	if rev := revisionOf(t, s, "files.read"); rev != 3 {
		t.Errorf("re-created tool stored at revision %d, want 3", rev)
	}
	staleUpdatesFail(t, s, "files.read", 1, 2)
	if out, err := s.Update(ctx(t), Record("files.read"), 3); err != nil || out.Registration.GetRevision() != 4 {
		t.Fatalf("Update expecting 3 = %v, %v; want revision 4", out.Registration, err)
	}
	// Again: the chain goes on from 4.
	if err := replica.Delete(ctx(t), "files.read"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if out := mustCreate(t, s, Record("files.read")); out.Registration.GetRevision() != 5 {
		t.Errorf("twice re-created tool's revision = %d, want 5", out.Registration.GetRevision())
	}
	staleUpdatesFail(t, s, "files.read", 1, 2, 3, 4)

	// Through CreateBatch, next to a name never seen.
	mustCreate(t, s, Record("git.log"))
	for rev := int64(1); rev <= 2; rev++ {
		if _, err := s.Update(ctx(t), Record("git.log"), rev); err != nil {
			t.Fatalf("Update: %v", err)
		}
	}
	if err := s.Delete(ctx(t), "git.log"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	// A batch that fails leaves the predecessor's revision in place.
	if _, err := s.CreateBatch(ctx(t), []store.Record{Record("git.log"), Record("files.read")}); !errors.Is(err, store.ErrAlreadyExists) {
		t.Fatalf("CreateBatch with a taken name: error %v, want ErrAlreadyExists", err)
	}
	stored, err := replica.CreateBatch(ctx(t), []store.Record{Record("a.fresh"), Record("git.log")})
	if err != nil || len(stored) != 2 {
		t.Fatalf("CreateBatch = %d, %v", len(stored), err)
	}
	for i, want := range []int64{1, 4} {
		name := stored[i].Name()
		if got := stored[i].Registration.GetRevision(); got != want {
			t.Errorf("CreateBatch returned %s at revision %d, want %d", name, got, want)
		}
		if got := revisionOf(t, s, name); got != want {
			t.Errorf("CreateBatch stored %s at revision %d, want %d", name, got, want)
		}
	}
	staleUpdatesFail(t, s, "git.log", 1, 2, 3)

	// A name never seen starts at 1, by Create too; another name with the
	// same collision key is another name.
	if out := mustCreate(t, s, Record("b.new")); out.Registration.GetRevision() != 1 {
		t.Errorf("new tool's revision = %d, want 1", out.Registration.GetRevision())
	}
	if err := s.Delete(ctx(t), "b.new"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if out := mustCreate(t, s, Record("B_new")); out.Registration.GetRevision() != 1 {
		t.Errorf("new tool's revision = %d, want 1", out.Registration.GetRevision())
	}
}

func testListPaging(t *testing.T, s, _ store.Store) {
	names := []string{"b.x", "a.b-c", "a.b_d", "a.bc", "Z.last", "a.B9", "m.m", "a.b.e"}
	for _, n := range names {
		mustCreate(t, s, Record(n))
	}
	want := slices.Clone(names)
	slices.Sort(want) // byte order, the catalogHash order
	all, err := s.Snapshot(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := recordNames(all); !slices.Equal(got, want) {
		t.Fatalf("Snapshot order = %v, want byte order %v", got, want)
	}
	var paged []string
	after := ""
	for range 10 {
		page, err := s.List(ctx(t), after, 3)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) > 3 {
			t.Fatalf("List returned %d > limit 3", len(page))
		}
		if len(page) == 0 {
			break
		}
		paged = append(paged, recordNames(page)...)
		after = page[len(page)-1].Name()
	}
	if !slices.Equal(paged, want) {
		t.Fatalf("paged = %v, want %v", paged, want)
	}
}

func recordNames(recs []store.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.Name()
	}
	return out
}

// Batch returns n records named prefix.t0000 and on, for tests of other
// packages too.
func Batch(prefix string, n int) []store.Record {
	out := make([]store.Record, n)
	for i := range out {
		out[i] = Record(fmt.Sprintf("%s.t%04d", prefix, i))
	}
	return out
}

func testBatch(t *testing.T, s, _ store.Store) {
	if got, err := s.CreateBatch(ctx(t), nil); len(got) != 0 || err != nil {
		t.Fatalf("empty batch = %d, %v", len(got), err)
	}
	recs := Batch("bulk", 50)
	recs[7].Registration.OutputSchemaJson = []byte(`{"type":"object" }`)
	stored, err := s.CreateBatch(ctx(t), recs)
	if err != nil || len(stored) != 50 {
		t.Fatalf("CreateBatch = %d, %v; want 50", len(stored), err)
	}
	all, err := s.Snapshot(ctx(t))
	if err != nil || len(all) != 50 {
		t.Fatalf("Snapshot = %d, %v; want 50", len(all), err)
	}
	for i, r := range all {
		sameRegistration(t, r, recs[i])
		if r.Registration.GetRevision() != 1 {
			t.Errorf("%s revision %d, want 1", r.Name(), r.Registration.GetRevision())
		}
		// What CreateBatch returned is what was stored, timestamps too.
		if !proto.Equal(stored[i].Registration, r.Registration) || !bytes.Equal(stored[i].Canonical, r.Canonical) || stored[i].Digest != r.Digest {
			t.Errorf("CreateBatch returned %v, stored %v", stored[i].Registration, r.Registration)
		}
	}
	// The returned records are the caller's to keep: they share nothing
	// with the store.
	stored[0].Registration.Description = "changed by the caller"
	if again, _ := s.Snapshot(ctx(t)); again[0].Registration.GetDescription() == "changed by the caller" {
		t.Error("a record CreateBatch returned aliases the stored one")
	}
}

func testBatchAllOrNothing(t *testing.T, s, _ store.Store) {
	mustCreate(t, s, Record("files.read"))
	mustCreate(t, s, Record("github.search"))
	cases := []struct {
		name  string
		extra store.Record
		check func(error) bool
	}{
		{"existing name", Record("files.read"), func(err error) bool {
			return errors.Is(err, store.ErrAlreadyExists) && strings.Contains(err.Error(), `"files.read"`)
		}},
		// A clash with a stored tool names both tools.
		{"collision key with stored", Record("files_read"), clash("files_read", "files.read")},
		{"case with stored", Record("GitHub.search"), clash("GitHub.search", "github.search")},
		{"collision within batch", Record("bulk_t0003"), func(err error) bool { return errors.Is(err, store.ErrConflict) }},
		{"duplicate within batch", Record("bulk.t0004"), func(err error) bool {
			return errors.Is(err, store.ErrAlreadyExists) || errors.Is(err, store.ErrConflict)
		}},
	}
	for _, c := range cases {
		recs := append(Batch("bulk", 10), c.extra)
		got, err := s.CreateBatch(ctx(t), recs)
		if !c.check(err) || got != nil {
			t.Errorf("%s: CreateBatch = %d, %v", c.name, len(got), err)
		}
		all, _ := s.Snapshot(ctx(t))
		if len(all) != 2 {
			t.Fatalf("%s: failed batch left %d tools, want the 2 from before", c.name, len(all))
		}
	}
}

// testBatchFirstOffender: a failing batch is reported by its first
// offending record in batch order, whether it clashes with a stored tool
// or with an earlier record of the batch, on every store alike (PostgreSQL
// named a later one: InvalidArgument on one store, AlreadyExists on the
// other, for one batch).
func testBatchFirstOffender(t *testing.T, s, _ store.Store) {
	mustCreate(t, s, Record("p.q"))
	mustCreate(t, s, Record("m.n"))
	isName := func(name string) func(error) bool {
		return func(err error) bool {
			return errors.Is(err, store.ErrAlreadyExists) && !errors.Is(err, store.ErrConflict) && strings.Contains(err.Error(), strconv.Quote(name))
		}
	}
	cases := []struct {
		name  string
		batch []string
		check func(error) bool
	}{
		{"key clash before a name clash", []string{"p_q", "m.n"}, clash("p_q", "p.q")},
		{"name clash before a key clash", []string{"a.b", "m.n", "p_q"}, isName("m.n")},
		{"stored clash before one within the batch", []string{"m.n", "x.y", "x_y"}, isName("m.n")},
		{"within the batch before a stored clash", []string{"x.y", "X.y", "p_q"}, clash("X.y", "x.y")},
	}
	for _, c := range cases {
		var recs []store.Record
		for _, n := range c.batch {
			recs = append(recs, Record(n))
		}
		if got, err := s.CreateBatch(ctx(t), recs); !c.check(err) || got != nil {
			t.Errorf("%s: CreateBatch(%v) = %d, %v", c.name, c.batch, len(got), err)
		}
	}
}

// clash accepts a ConflictError between name and the stored existing.
func clash(name, existing string) func(error) bool {
	return func(err error) bool {
		var ce *store.ConflictError
		return errors.As(err, &ce) && ce.Name == name && ce.Existing == existing
	}
}

// waitFor takes changes from f until want is satisfied or the deadline.
func waitFor(t *testing.T, f *store.Feed, what string, want func(names []string, all bool) bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case <-f.Ready():
			if names, all := f.Take(); want(names, all) {
				return
			}
		case <-deadline:
			t.Fatalf("change feed: no %s within 10s", what)
		}
	}
}

func has(name string) func([]string, bool) bool {
	return func(names []string, all bool) bool { return all || slices.Contains(names, name) }
}

func testWatch(t *testing.T, s, replica store.Store) {
	wctx, cancel := context.WithCancel(ctx(t))
	defer cancel()
	f, err := s.Watch(wctx)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	mustCreate(t, s, Record("files.read"))
	waitFor(t, f, "create", has("files.read"))
	if _, err := s.Update(ctx(t), Record("files.read"), 0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, f, "update", has("files.read"))
	if err := s.Delete(ctx(t), "files.read"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, f, "delete", has("files.read"))
	// Another replica's batch is "all changed" (the writing Store's own
	// feed may leave its batch out: its caller has the records).
	if _, err := replica.CreateBatch(ctx(t), Batch("bulk", 3)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, f, "batch (all changed)", func(_ []string, all bool) bool { return all })
	// A failed write notifies nothing visible: the next event is the next
	// real change.
	_, _ = s.Create(ctx(t), Record("bulk.t0000"))
	mustCreate(t, s, Record("files.write"))
	waitFor(t, f, "create after failed write", func(names []string, all bool) bool {
		if all || slices.Contains(names, "bulk.t0000") {
			t.Errorf("failed create was notified: %v all=%v", names, all)
		}
		return slices.Contains(names, "files.write")
	})
}

func testWatchStops(t *testing.T, s, _ store.Store) {
	wctx, cancel := context.WithCancel(ctx(t))
	if _, err := s.Watch(wctx); err != nil {
		t.Fatalf("Watch: %v", err)
	}
	cancel()
	// Writes after the watcher is gone must not block or fail.
	mustCreate(t, s, Record("files.read"))
	if err := s.Delete(ctx(t), "files.read"); err != nil {
		t.Fatal(err)
	}
}

func entries(t *testing.T, s store.Store) store.Entries {
	t.Helper()
	e, ok := s.(store.Entries)
	if !ok {
		t.Fatalf("%T does not keep prompts and resources (store.Entries)", s)
	}
	return e
}

func entry(key, body string) store.Entry {
	sum := sha256.Sum256([]byte(body))
	return store.Entry{Key: key, Registration: []byte("reg:" + body), Canonical: []byte(body), Digest: hex.EncodeToString(sum[:])}
}

// testEntries: an entry is stored at revision 1, replaced at revision 2
// with the new bytes, listed by key in byte order, and deleted once.
func testEntries(t *testing.T, s, _ store.Store) {
	e := entries(t, s)
	ctx := context.Background()
	first, err := e.PutEntry(ctx, store.KindPrompt, entry("b.prompt", `{"name":"b.prompt"}`))
	if err != nil || first.Revision != 1 || first.UpdatedAt.IsZero() {
		t.Fatalf("PutEntry = %+v, %v", first, err)
	}
	second, err := e.PutEntry(ctx, store.KindPrompt, entry("b.prompt", `{"name":"b.prompt","title":"B"}`))
	if err != nil || second.Revision != 2 {
		t.Fatalf("replace = %+v, %v", second, err)
	}
	if _, err := e.PutEntry(ctx, store.KindPrompt, entry("B.prompt", `{"name":"B.prompt"}`)); err != nil {
		t.Fatal(err)
	}
	got, err := e.Entries(ctx, store.KindPrompt)
	if err != nil || len(got) != 2 || got[0].Key != "B.prompt" || got[1].Key != "b.prompt" {
		t.Fatalf("Entries = %+v, %v: want B.prompt, b.prompt (byte order)", got, err)
	}
	if keys, err := e.EntryKeys(ctx, store.KindPrompt); err != nil || strings.Join(keys, " ") != "B.prompt b.prompt" {
		t.Fatalf("EntryKeys = %q, %v: want B.prompt, b.prompt (byte order)", keys, err)
	}
	if keys, err := e.EntryKeys(ctx, store.KindResource); err != nil || len(keys) != 0 {
		t.Fatalf("EntryKeys(resources) = %q, %v: want none", keys, err)
	}
	if string(got[1].Canonical) != `{"name":"b.prompt","title":"B"}` || string(got[1].Registration) != `reg:{"name":"b.prompt","title":"B"}` ||
		got[1].Digest != second.Digest || got[1].Revision != 2 {
		t.Fatalf("stored %+v: want the replacement's bytes at revision 2", got[1])
	}
	if g, err := e.GetEntry(ctx, store.KindPrompt, "b.prompt"); err != nil || g.Revision != 2 || g.Digest != second.Digest ||
		string(g.Registration) != string(got[1].Registration) {
		t.Fatalf("GetEntry = %+v, %v", g, err)
	}
	if err := e.DeleteEntry(ctx, store.KindPrompt, "b.prompt"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.GetEntry(ctx, store.KindPrompt, "b.prompt"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetEntry after delete: %v, want ErrNotFound", err)
	}
	if err := e.DeleteEntry(ctx, store.KindPrompt, "b.prompt"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second delete: %v, want ErrNotFound", err)
	}
	if again, err := e.PutEntry(ctx, store.KindPrompt, entry("b.prompt", `{}`)); err != nil || again.Revision != 1 {
		t.Fatalf("put after delete = %+v, %v: want revision 1", again, err)
	}
}

// testEntriesKeyLength: every store keeps keys of 1 to MaxKeyLen
// characters (non-ASCII counted as one each) and refuses an empty or a
// longer one as ErrInvalid.
func testEntriesKeyLength(t *testing.T, s, _ store.Store) {
	e := entries(t, s)
	ctx := context.Background()
	for _, k := range []store.Kind{store.KindPrompt, store.KindResource, store.KindUpstream} {
		n := store.MaxKeyLen(k)
		if _, err := e.PutEntry(ctx, k, entry(strings.Repeat("é", n), `{}`)); err != nil {
			t.Errorf("%s key of %d characters: %v", k, n, err)
		}
		for _, key := range []string{"", strings.Repeat("a", n+1)} {
			if _, err := e.PutEntry(ctx, k, entry(key, `{}`)); !errors.Is(err, store.ErrInvalid) {
				t.Errorf("%s key of %d characters: %v, want ErrInvalid", k, len(key), err)
			}
		}
	}
}

// testEntriesKinds: a prompt and a resource with the same key are two
// entries; tools are not entries.
func testEntriesKinds(t *testing.T, s, _ store.Store) {
	e := entries(t, s)
	ctx := context.Background()
	for _, k := range []store.Kind{store.KindPrompt, store.KindResource, store.KindUpstream} {
		if _, err := e.PutEntry(ctx, k, entry("same", `{"kind":"`+string(k)+`"}`)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Create(ctx, Record("files.read")); err != nil {
		t.Fatal(err)
	}
	for _, k := range []store.Kind{store.KindPrompt, store.KindResource, store.KindUpstream} {
		got, err := e.Entries(ctx, k)
		if err != nil || len(got) != 1 || string(got[0].Canonical) != `{"kind":"`+string(k)+`"}` {
			t.Errorf("%s entries = %+v, %v", k, got, err)
		}
	}
	if err := e.DeleteEntry(ctx, store.KindResource, "files.read"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a tool deleted as a resource: %v", err)
	}
}

// testEntriesMatchKeys: an entry is found by its match key, and every one
// stored without a key or with another scope's (version's) is returned
// with them (the caller checks those); a replacement carries its own key;
// SetMatchKey keys an entry without a new revision and names one that is
// not there. Resources are found so by their URI's key, upstreams by
// their folded namespace.
func testEntriesMatchKeys(t *testing.T, s, _ store.Store) {
	for _, kind := range []store.Kind{store.KindResource, store.KindUpstream} {
		t.Run(string(kind), func(t *testing.T) { entriesMatchKeys(t, s, kind) })
	}
}

func entriesMatchKeys(t *testing.T, s store.Store, kind store.Kind) {
	e := entries(t, s)
	ctx := context.Background()
	put := func(key, matchKey string) {
		t.Helper()
		en := entry(key, `{"uri":"`+key+`"}`)
		en.MatchKey = matchKey
		if _, err := e.PutEntry(ctx, kind, en); err != nil {
			t.Fatal(err)
		}
	}
	keys := func(es []store.Entry, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, x := range es {
			out = append(out, x.Key+"="+x.MatchKey)
		}
		return strings.Join(out, " ")
	}
	const v = "v1:"
	put("test://a/x", v+"k1")
	put("test://a/X", v+"k1")
	put("test://b", v+"k2")
	put("test://old", "")
	put("test://older", "v0:k1")
	put("test://newer", "v2:k9")
	if got := keys(e.EntriesMatching(ctx, kind, v, v+"k1")); got != "test://a/X=v1:k1 test://a/x=v1:k1 test://newer=v2:k9 test://old= test://older=v0:k1" {
		t.Errorf("EntriesMatching(k1) = %s, want both keyed k1 and those of no or another version, in byte order", got)
	}
	if got := keys(e.EntriesMatching(ctx, kind, v, v+"k3")); got != "test://newer=v2:k9 test://old= test://older=v0:k1" {
		t.Errorf("EntriesMatching(k3) = %s, want those of no or another version", got)
	}
	if got := keys(e.EntriesMatching(ctx, kind, v, "")); got != "test://newer=v2:k9 test://old= test://older=v0:k1" {
		t.Errorf("EntriesMatching(no key) = %s, want those of no or another version alone", got)
	}
	put("test://b", v+"k3")
	if got := keys(e.EntriesMatching(ctx, kind, v, v+"k3")); got != "test://b=v1:k3 test://newer=v2:k9 test://old= test://older=v0:k1" {
		t.Errorf("after the replacement, EntriesMatching(k3) = %s", got)
	}
	for _, k := range []string{"test://old", "test://older", "test://newer"} {
		if err := e.SetMatchKey(ctx, kind, k, v+"k1"); err != nil {
			t.Fatal(err)
		}
	}
	if g, err := e.GetEntry(ctx, kind, "test://old"); err != nil || g.MatchKey != v+"k1" || g.Revision != 1 {
		t.Errorf("after SetMatchKey: %+v, %v; want key v1:k1 at revision 1", g, err)
	}
	if got := keys(e.EntriesMatching(ctx, kind, v, v+"k3")); got != "test://b=v1:k3" {
		t.Errorf("with every entry keyed, EntriesMatching(k3) = %s", got)
	}
	if err := e.SetMatchKey(ctx, kind, "test://none", v+"k1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("SetMatchKey of no entry: %v, want ErrNotFound", err)
	}
	if got := keys(e.EntriesMatching(ctx, store.KindPrompt, v, v+"k1")); got != "" {
		t.Errorf("prompts matching k1: %s, want none", got)
	}
}
