package upstream_test

import (
	"testing"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"

	"github.com/sharedos/toolshare/catalog-svc/internal/upstream"
)

// BenchmarkHandle is the kernel's dispatch of one tools/call to an
// upstream over Streamable HTTP (2026-07-28), the fixture upstream in the
// same process: what the provider costs per call, the upstream's own work
// included (issue 19, item 9; the full path is `make bench-upstream`).
func BenchmarkHandle(b *testing.B) {
	h := newHarness(b, upstream.Guard{})
	if _, err := h.m.Add(b.Context(), &sharedosv1.UpstreamProvider{Namespace: "fx", Url: h.url, AutoApproveNew: true}, "bench"); err != nil {
		b.Fatal(err)
	}
	c, err := h.h.Client(upstream.Target("fx"))
	if err != nil {
		b.Fatal(err)
	}
	req := &sharedosv1.HandleRequest{Tool: "fx.echo", ArgumentsJson: []byte(`{"text":"a line to append to the notes"}`)}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if res, err := c.Handle(b.Context(), req); err != nil || res.GetIsError() {
				b.Errorf("Handle: %v, %v", res, err)
				return
			}
		}
	})
}
