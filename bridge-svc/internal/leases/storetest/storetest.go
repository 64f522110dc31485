package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/sharedos/toolshare/bridge-svc/internal/leases"
	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
)

// Factory returns a fresh, empty store for one subtest.
type Factory func(t *testing.T) leases.Store

// Run runs the suite against stores made by newStore.
func Run(t *testing.T, newStore Factory) {
	t.Run("CreateGetRoundTrip", func(t *testing.T) { testRoundTrip(t, newStore(t)) })
	t.Run("CreateDuplicate", func(t *testing.T) { testDuplicate(t, newStore(t)) })
	t.Run("UnknownTurn", func(t *testing.T) { testUnknown(t, newStore(t)) })
	t.Run("CloseIsVisibleAndIdempotent", func(t *testing.T) { testClose(t, newStore(t)) })
	t.Run("ExpiredByStoreClock", func(t *testing.T) { testExpired(t, newStore(t)) })
	t.Run("Inactive", func(t *testing.T) { testInactive(t, newStore(t)) })
	t.Run("TurnByToken", func(t *testing.T) { testTurnByToken(t, newStore(t)) })
	t.Run("PurgeInactive", func(t *testing.T) { testPurgeInactive(t, newStore(t)) })
	t.Run("TerminateSession", func(t *testing.T) { testTerminateSession(t, newStore(t)) })
}

// testTerminateSession: an ended session is in every later status, once;
// an unknown turn is ErrNotFound; the bound is kept.
func testTerminateSession(t *testing.T, s leases.Store) {
	ctx := context.Background()
	now := time.Now()
	l := Sample(t, now, now.Add(time.Hour))
	if err := s.Create(ctx, l); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := s.TerminateSession(ctx, l.TurnID, "mcp-s1-a.b"); err != nil {
			t.Fatal(err)
		}
	}
	st, err := s.Status(ctx, l.TurnID)
	if err != nil || !st.Terminated("mcp-s1-a.b") || st.Terminated("mcp-s1-c.d") || len(st.TerminatedSessions) != 1 {
		t.Fatalf("status %+v, %v: want exactly the one ended session", st, err)
	}
	if err := s.TerminateSession(ctx, "tunknownunknownunknownunkno", "x"); !errors.Is(err, leases.ErrNotFound) {
		t.Errorf("unknown turn: %v, want ErrNotFound", err)
	}
	for i := 1; i < leases.MaxTerminatedSessions; i++ {
		if err := s.TerminateSession(ctx, l.TurnID, fmt.Sprintf("s-%d", i)); err != nil {
			t.Fatalf("session %d: %v", i, err)
		}
	}
	if err := s.TerminateSession(ctx, l.TurnID, "one-too-many"); !errors.Is(err, leases.ErrTooManySessions) {
		t.Errorf("past the bound: %v, want ErrTooManySessions", err)
	}
	if err := s.TerminateSession(ctx, l.TurnID, "s-1"); err != nil {
		t.Errorf("a repeat at the bound: %v, want nil (idempotent)", err)
	}
}

// Sample returns a lease with every field set, expiring at expires.
func Sample(t testing.TB, opened, expires time.Time) *leases.Lease {
	t.Helper()
	id, err := leases.NewTurnID()
	if err != nil {
		t.Fatal(err)
	}
	_, hash, err := leases.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	return &leases.Lease{
		TurnID:    id,
		TokenHash: hash,
		Context: &sharedosv1.AccessContext{
			Principal: "alice", Tenant: "acme", Roles: []string{"engineer"},
			Attributes: map[string]string{"department": "r&d"},
		},
		Policy: &sharedosv1.ToolPolicy{
			Mode: sharedosv1.PolicyMode_POLICY_MODE_STRICT, HarnessLocal: []string{"patch"},
		},
		Harness: &sharedosv1.HarnessIdentity{
			Name: "pi", Version: "0.74.2", McpSupport: sharedosv1.McpSupport_MCP_SUPPORT_EXTENSION,
			ExtensionName: "pi-mcp-adapter",
		},
		DeclaredModel: "fake-model",
		CatalogHash:   "c0ffee",
		Tools: []*sharedosv1.PublishedTool{{
			Name: "files.read", Description: "Read a file — ünïcode",
			InputSchemaJson:  []byte(`{"type":"object","properties":{"path":{"type":"string"}}}`),
			OutputSchemaJson: []byte(`{"type":"object"}`),
			AnnotationsJson:  []byte(`{"readOnlyHint":true}`),
			Metadata:         &sharedosv1.ToolMetadata{Namespace: "files", Source: "provider:files"},
			CanonicalJson:    []byte(`{"name":"files.read"}`),
		}},
		Prompts: []*sharedosv1.PublishedPrompt{{Name: "test_simple_prompt", Description: "A prompt",
			Arguments: []*sharedosv1.PromptArgument{{Name: "arg1", Required: true}}, CanonicalJson: []byte(`{"name":"test_simple_prompt"}`), Digest: "d1"}},
		Resources: []*sharedosv1.PublishedResource{{Uri: "test://template/{id}/data", Template: true, Name: "data",
			MimeType: "application/json", CanonicalJson: []byte(`{"name":"data"}`), Digest: "d2"}},
		PromptsResourcesHash: "beef",
		PortableNames:        true,
		Grant:                "eyJhbGciOiJFZERTQSJ9.eyJ0aWQiOiJ0In0.c2ln",
		OpenedAt:             opened.UTC().Truncate(time.Microsecond),
		ExpiresAt:            expires.UTC().Truncate(time.Microsecond),
	}
}

func testRoundTrip(t *testing.T, s leases.Store) {
	ctx := context.Background()
	now := time.Now()
	want := Sample(t, now, now.Add(time.Hour))
	if err := s.Create(ctx, want); err != nil {
		t.Fatalf("Create: %v", err)
	}
	got, st, err := s.Get(ctx, want.TurnID)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if got.TurnID != want.TurnID || got.TokenHash != want.TokenHash || got.DeclaredModel != want.DeclaredModel ||
		got.CatalogHash != want.CatalogHash || got.PortableNames != want.PortableNames || got.Grant != want.Grant ||
		!got.OpenedAt.Equal(want.OpenedAt) || !got.ExpiresAt.Equal(want.ExpiresAt) || !got.ClosedAt.IsZero() {
		t.Errorf("Get = %+v, want %+v", got, want)
	}
	for name, pair := range map[string][2]proto.Message{
		"context": {got.Context, want.Context}, "policy": {got.Policy, want.Policy}, "harness": {got.Harness, want.Harness},
	} {
		if !proto.Equal(pair[0], pair[1]) {
			t.Errorf("%s = %v, want %v", name, pair[0], pair[1])
		}
	}
	if len(got.Prompts) != 1 || !proto.Equal(got.Prompts[0], want.Prompts[0]) || len(got.Resources) != 1 ||
		!proto.Equal(got.Resources[0], want.Resources[0]) || got.PromptsResourcesHash != want.PromptsResourcesHash {
		t.Errorf("prompts %v, resources %v, hash %q: want %v, %v, %q", got.Prompts, got.Resources, got.PromptsResourcesHash,
			want.Prompts, want.Resources, want.PromptsResourcesHash)
	}
	if len(got.Tools) != len(want.Tools) || !proto.Equal(got.Tools[0], want.Tools[0]) {
		t.Errorf("tools = %v, want %v", got.Tools, want.Tools)
	}
	if !st.Open() || st.State() != sharedosv1.TurnState_TURN_STATE_OPEN || st.TokenHash != want.TokenHash {
		t.Errorf("status = %+v, want open with the token hash", st)
	}
	if d := time.Until(st.StoreNow); st.StoreNow.IsZero() || d > time.Minute || d < -time.Minute {
		t.Errorf("status StoreNow = %v, want the store's current time", st.StoreNow)
	}
	// The store must not alias the caller's lease.
	want.Tools[0].Name = "mutated"
	again, _, err := s.Get(ctx, want.TurnID)
	if err != nil {
		t.Fatal(err)
	}
	if again.Tools[0].Name != "files.read" {
		t.Errorf("store aliased the caller's tools: %q", again.Tools[0].Name)
	}
}

func testDuplicate(t *testing.T, s leases.Store) {
	ctx := context.Background()
	l := Sample(t, time.Now(), time.Now().Add(time.Hour))
	if err := s.Create(ctx, l); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(ctx, l); !errors.Is(err, leases.ErrExists) {
		t.Errorf("second Create = %v, want ErrExists", err)
	}
}

func testUnknown(t *testing.T, s leases.Store) {
	ctx := context.Background()
	if _, _, err := s.Get(ctx, "tunknown"); !errors.Is(err, leases.ErrNotFound) {
		t.Errorf("Get = %v, want ErrNotFound", err)
	}
	if _, err := s.Status(ctx, "tunknown"); !errors.Is(err, leases.ErrNotFound) {
		t.Errorf("Status = %v, want ErrNotFound", err)
	}
	if err := s.Close(ctx, "tunknown"); !errors.Is(err, leases.ErrNotFound) {
		t.Errorf("Close = %v, want ErrNotFound", err)
	}
}

func testClose(t *testing.T, s leases.Store) {
	ctx := context.Background()
	l := Sample(t, time.Now(), time.Now().Add(time.Hour))
	if err := s.Create(ctx, l); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx, l.TurnID); err != nil {
		t.Fatalf("Close: %v", err)
	}
	st, err := s.Status(ctx, l.TurnID)
	if err != nil {
		t.Fatal(err)
	}
	if st.Open() || st.State() != sharedosv1.TurnState_TURN_STATE_CLOSED || st.ClosedAt.IsZero() {
		t.Fatalf("status after close = %+v, want closed", st)
	}
	first := st.ClosedAt
	if err := s.Close(ctx, l.TurnID); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	_, st2, err := s.Get(ctx, l.TurnID)
	if err != nil {
		t.Fatal(err)
	}
	if !st2.ClosedAt.Equal(first) {
		t.Errorf("second Close moved closed_at from %v to %v", first, st2.ClosedAt)
	}
}

func testExpired(t *testing.T, s leases.Store) {
	ctx := context.Background()
	// Opened two hours ago with a one-hour lease: expired by any clock,
	// without the test waiting for anything.
	past := time.Now().Add(-2 * time.Hour)
	l := Sample(t, past, past.Add(time.Hour))
	if err := s.Create(ctx, l); err != nil {
		t.Fatal(err)
	}
	st, err := s.Status(ctx, l.TurnID)
	if err != nil {
		t.Fatal(err)
	}
	if st.Open() || st.State() != sharedosv1.TurnState_TURN_STATE_EXPIRED {
		t.Errorf("status = %+v, want expired", st)
	}
}

func testInactive(t *testing.T, s leases.Store) {
	ctx := context.Background()
	now := time.Now()
	open := Sample(t, now, now.Add(time.Hour))
	closed := Sample(t, now, now.Add(time.Hour))
	expired := Sample(t, now.Add(-2*time.Hour), now.Add(-time.Hour))
	for _, l := range []*leases.Lease{open, closed, expired} {
		if err := s.Create(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(ctx, closed.TurnID); err != nil {
		t.Fatal(err)
	}
	got, err := s.Inactive(ctx, []string{open.TurnID, closed.TurnID, expired.TurnID, "tunknown"})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	want := []string{closed.TurnID, expired.TurnID, "tunknown"}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("Inactive = %v, want %v", got, want)
	}
	if got, err := s.Inactive(ctx, nil); err != nil || len(got) != 0 {
		t.Errorf("Inactive(nil) = %v, %v", got, err)
	}
}

func testTurnByToken(t *testing.T, s leases.Store) {
	ctx := context.Background()
	l := Sample(t, time.Now(), time.Now().Add(time.Hour))
	if err := s.Create(ctx, l); err != nil {
		t.Fatal(err)
	}
	if got, err := s.TurnByToken(ctx, l.TokenHash); err != nil || got != l.TurnID {
		t.Errorf("TurnByToken = %q, %v, want %q", got, err, l.TurnID)
	}
	if _, err := s.TurnByToken(ctx, leases.HashToken("not-a-token")); !errors.Is(err, leases.ErrNotFound) {
		t.Errorf("TurnByToken(unknown) = %v, want ErrNotFound", err)
	}
}

func testPurgeInactive(t *testing.T, s leases.Store) {
	ctx := context.Background()
	now := time.Now()
	open := Sample(t, now, now.Add(time.Hour))
	// Open on the store's clock although its expiry is before the second
	// cutoff below: only an expired lease goes for its expiry.
	openShort := Sample(t, now, now.Add(10*time.Minute))
	closed := Sample(t, now, now.Add(time.Hour))
	expiredOld := Sample(t, now.Add(-3*time.Hour), now.Add(-2*time.Hour))
	expiredRecent := Sample(t, now.Add(-time.Hour), now.Add(-30*time.Minute))
	for _, l := range []*leases.Lease{open, openShort, closed, expiredOld, expiredRecent} {
		if err := s.Create(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(ctx, closed.TurnID); err != nil {
		t.Fatal(err)
	}
	kept := func(want ...*leases.Lease) {
		t.Helper()
		for _, l := range want {
			if _, err := s.Status(ctx, l.TurnID); err != nil {
				t.Errorf("Status(%s) after purge = %v, want kept", l.TurnID, err)
			}
			// Whole: the purge took nothing a kept lease pinned.
			if got, _, err := s.Get(ctx, l.TurnID); err != nil || len(got.Tools) != len(l.Tools) || len(got.Prompts) != len(l.Prompts) {
				t.Errorf("Get(%s) after purge = %v, want its pinned catalogue", l.TurnID, err)
			}
		}
	}
	gone := func(want ...*leases.Lease) {
		t.Helper()
		for _, l := range want {
			if _, err := s.Status(ctx, l.TurnID); !errors.Is(err, leases.ErrNotFound) {
				t.Errorf("Status(%s) after purge = %v, want ErrNotFound", l.TurnID, err)
			}
			if _, err := s.TurnByToken(ctx, l.TokenHash); !errors.Is(err, leases.ErrNotFound) {
				t.Errorf("TurnByToken(%s) after purge = %v, want ErrNotFound", l.TurnID, err)
			}
		}
	}

	// An hour's retention: only the lease expired two hours ago goes; the
	// one closed just now and the one expired half an hour ago stay.
	n, err := s.PurgeInactive(ctx, now.Add(-time.Hour))
	if err != nil || n != 1 {
		t.Fatalf("PurgeInactive(now-1h) = %d, %v, want 1", n, err)
	}
	gone(expiredOld)
	kept(open, openShort, closed, expiredRecent)

	// Close stamps the store's clock, so "closed long ago" is a cutoff
	// after the close: the closed and the expired lease go, both open
	// ones stay (openShort expires before the cutoff but has not expired).
	n, err = s.PurgeInactive(ctx, now.Add(30*time.Minute))
	if err != nil || n != 2 {
		t.Fatalf("PurgeInactive(now+30m) = %d, %v, want 2", n, err)
	}
	gone(closed, expiredRecent)
	kept(open, openShort)

	if n, err := s.PurgeInactive(ctx, now.Add(30*time.Minute)); err != nil || n != 0 {
		t.Errorf("repeated PurgeInactive = %d, %v, want 0", n, err)
	}
}
