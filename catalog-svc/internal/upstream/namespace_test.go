package upstream_test

import (
	"errors"
	"strings"
	"testing"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/toolname"

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
