package upstream_test

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/toolname"

	"github.com/sharedos/toolshare/catalog-svc/internal/store"
	"github.com/sharedos/toolshare/catalog-svc/internal/upstream"
)

// A provider's namespace is the first segment of its tools' names
// (toolname.ValidateNamespaceField): one no tool name can begin with ("a/b",
// "x:y", "a.b"), or too long to leave room for ".tool" (PostgreSQL's
// upstreams table holds 128 characters; 200 failed there as Internal and
// was kept by the memory store), is refused at add naming the field and
// the rule, and nothing is stored.
func TestANamespaceIsAToolNamesFirstSegment(t *testing.T) {
	h := newHarness(t, upstream.Guard{})
	for _, ns := range []string{"", "a/b", "x:y", "a.b", "fs ", "fs\x00", "fïchiers",
		strings.Repeat("n", toolname.MaxNamespaceLen+1), strings.Repeat("n", 200)} {
		_, err := h.m.Add(t.Context(), &sharedosv1.UpstreamProvider{Namespace: ns, Url: h.url, AutoApproveNew: true}, "tester")
		var ve *upstream.ValidationError
		if !errors.As(err, &ve) || ve.Field != "namespace" || !strings.Contains(ve.Detail, toolname.RuleNamespace) {
			t.Errorf("add of namespace %q: %v, want a refusal of namespace (%s)", ns, err, toolname.RuleNamespace)
		}
		if _, err := h.m.Get(t.Context(), ns); !errors.Is(err, upstream.ErrNotFound) {
			t.Errorf("the refused namespace %q was stored: %v", ns, err)
		}
	}
	for _, ns := range []string{"fs", "A-b_9", "-", strings.Repeat("n", toolname.MaxNamespaceLen)} {
		if err := h.m.Validate(&sharedosv1.UpstreamProvider{Namespace: ns, Url: h.url}); err != nil {
			t.Errorf("namespace %q: %v", ns, err)
		}
	}
}

// An upstream added before the namespace rule, under the identifier rule
// it replaced ("a.b"), is still found and removed by its namespace: the
// lookup refuses unread only a namespace no upstream can have (a NUL,
// non-ASCII), which is NotFound on every store.
func TestAnUpstreamAddedBeforeTheNamespaceRuleIsFound(t *testing.T) {
	h := newHarness(t, upstream.Guard{})
	ctx := t.Context()
	b, err := proto.Marshal(&sharedosv1.GetProviderResponse{Provider: &sharedosv1.UpstreamProvider{Namespace: "a.b", Url: h.url}, Status: &sharedosv1.UpstreamStatus{}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.mem.PutEntry(ctx, store.KindUpstream, store.Entry{Key: "a.b", Registration: b, Canonical: []byte{}}); err != nil {
		t.Fatal(err)
	}
	if rec, err := h.m.Get(ctx, "a.b"); err != nil || rec.GetProvider().GetNamespace() != "a.b" {
		t.Fatalf("Get(a.b) = %v, %v", rec, err)
	}
	if err := h.m.Remove(ctx, "a.b"); err != nil {
		t.Fatalf("Remove(a.b): %v", err)
	}
	for _, ns := range []string{"a.b", "fs\x00", "f\xffs", "fïchiers", ""} {
		if _, err := h.m.Get(ctx, ns); !errors.Is(err, upstream.ErrNotFound) {
			t.Errorf("Get(%q): %v, want ErrNotFound", ns, err)
		}
		if err := h.m.Remove(ctx, ns); !errors.Is(err, upstream.ErrNotFound) {
			t.Errorf("Remove(%q): %v, want ErrNotFound", ns, err)
		}
		if holder, err := h.m.Holder(ctx, ns); holder != "" || err != nil {
			t.Errorf("Holder(%q) = %q, %v", ns, holder, err)
		}
	}
}
