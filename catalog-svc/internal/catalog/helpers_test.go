package catalog_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"

	"github.com/sharedos/toolshare/catalog-svc/internal/catalog"
	"github.com/sharedos/toolshare/catalog-svc/internal/store"
	"github.com/sharedos/toolshare/catalog-svc/internal/store/memory"
)

// reg returns a valid managed registration for name ("<ns>.<tool>").
func reg(name string) *sharedosv1.ToolRegistration {
	ns, _, _ := strings.Cut(name, ".")
	return &sharedosv1.ToolRegistration{
		Name:             name,
		Description:      "Reads a file.\n\tIndented line.",
		InputSchemaJson:  []byte(`{"type": "object", "properties": {"path": {"type": "string", "description": "absolute path"}}, "required": ["path"], "additionalProperties": false}`),
		OutputSchemaJson: []byte(`{"type":"object","properties":{"text":{"type":"string"}}}`),
		AnnotationsJson:  []byte(`{"title":"Read file","readOnlyHint":true}`),
		Metadata:         &sharedosv1.ToolMetadata{Namespace: ns, Source: "provider:" + ns},
		Class:            sharedosv1.ToolClass_TOOL_CLASS_MANAGED,
		Requirement:      &sharedosv1.Requirement{Action: "read", Resource: "file:{path}", PathCleaning: sharedosv1.PathCleaning_PATH_CLEANING_POSIX},
		Handler:          &sharedosv1.HandlerRef{Target: "127.0.0.1:7404"},
	}
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newService returns a started Service over st (a fresh memory store when nil).
func newService(t testing.TB, st store.Store, f catalog.ToolFilter) *catalog.Service {
	t.Helper()
	if st == nil {
		st = memory.New()
	}
	svc, err := catalog.New(catalog.Config{Store: st, Filter: f})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(testCtx(t)); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	return svc
}

// fakeFilter answers FilterTools from a per-principal predicate and records
// the requests it got.
type fakeFilter struct {
	mu    sync.Mutex
	calls int
	err   error
	allow func(actx *sharedosv1.AccessContext, tool *sharedosv1.ToolFacts) bool
}

func (f *fakeFilter) FilterTools(_ context.Context, in *sharedosv1.FilterToolsRequest, _ ...grpc.CallOption) (*sharedosv1.FilterToolsResponse, error) {
	f.mu.Lock()
	f.calls++
	err := f.err
	f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if in.GetAction() != "list" {
		return nil, fmt.Errorf("fake filter: action %q, want list", in.GetAction())
	}
	var out []string
	for _, t := range in.GetTools() {
		if f.allow(in.GetContext(), t) {
			out = append(out, t.GetName())
		}
	}
	return &sharedosv1.FilterToolsResponse{AllowedTools: out, DecisionId: "d1"}, nil
}

// testReplicas registers, updates and deregisters through a and waits (with
// a deadline, polling) until b's cache reflects each change.
func testReplicas(t *testing.T, a, b *catalog.Service) {
	t.Helper()
	ctx := testCtx(t)
	if _, _, err := a.Register(ctx, reg("files.read")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "registration visible on the other replica", func() bool {
		_, err := b.Resolve(ctx, "files.read")
		return err == nil
	})
	up := reg("files.read")
	up.Description = "v2"
	if _, _, err := a.Update(ctx, up, 0); err != nil {
		t.Fatal(err)
	}
	eventually(t, "update visible on the other replica", func() bool {
		r, err := b.Resolve(ctx, "files.read")
		return err == nil && r.Published.GetDescription() == "v2"
	})
	if err := a.Deregister(ctx, "files.read"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "deregistration visible on the other replica", func() bool {
		_, err := b.Resolve(ctx, "files.read")
		l, lerr := b.ListTools(ctx, nil)
		return errors.Is(err, catalog.ErrNotFound) && lerr == nil && len(l.Tools) == 0
	})
	regs := []*sharedosv1.ToolRegistration{reg("bulk.a"), reg("bulk.b")}
	if _, err := a.RegisterBatch(ctx, regs); err != nil {
		t.Fatal(err)
	}
	eventually(t, "batch visible on the other replica", func() bool {
		l, err := b.ListTools(ctx, nil)
		return err == nil && len(l.Tools) == 2
	})
}

// eventually polls cond until it holds. The cap only ends a test that
// would otherwise hang on a change that never arrives: how soon a change
// is visible is measured (docs/benchmarks.md), not asserted here, where a
// loaded machine would make a time bound flaky.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(changeCap)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, changeCap)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// changeCap bounds eventually's wait, inside testCtx's 30 s.
const changeCap = 20 * time.Second

func memoryStore() store.Store { return memory.New() }
