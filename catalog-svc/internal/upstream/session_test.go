package upstream_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mark3labs/mcp-go/server"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"

	"github.com/sharedos/toolshare/catalog-svc/internal/store/memory"
	"github.com/sharedos/toolshare/catalog-svc/internal/upstream"
)

// A handshake that hangs holds up no other caller past its own end, and
// closing the connection ends it: a caller waiting to connect leaves when
// its context does, while the handshake still hangs; closing the manager
// ends the handshake (cancelled, not timed out) and the call with it.
func TestHangingHandshakeHoldsNoOneElse(t *testing.T) {
	inner := server.NewStreamableHTTPServer(fixture(newState()).srv)
	var hang atomic.Bool
	entered, release := make(chan struct{}, 1), make(chan struct{})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if hang.Load() && (bytes.Contains(b, []byte(`"initialize"`)) || bytes.Contains(b, []byte(`"server/discover"`))) {
			select {
			case entered <- struct{}{}:
			default:
			}
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	t.Cleanup(func() { close(release) })
	mem := memory.New()
	m := upstream.New(upstream.Config{Store: mem, Registry: newCatalog(t, mem)})
	t.Cleanup(func() { _ = m.Close() })
	if _, err := m.Add(t.Context(), &sharedosv1.UpstreamProvider{Namespace: "fx", Url: hs.URL + "/mcp", AutoApproveNew: true}, "op"); err != nil {
		t.Fatal(err)
	}
	// Another replica (a manager with no session yet) connects, and its
	// handshake hangs.
	hang.Store(true)
	other := upstream.New(upstream.Config{Store: mem, Registry: newCatalog(t, mem)})
	c, err := upstream.Handlers{Upstreams: other}.Client(upstream.Target("fx"))
	if err != nil {
		t.Fatal(err)
	}
	first := make(chan error, 1)
	go func() {
		_, err := c.Handle(context.Background(), &sharedosv1.HandleRequest{Tool: "fx.echo", ArgumentsJson: []byte(`{"text":"a"}`)})
		first <- err
	}()
	<-entered
	ctx, cancel := context.WithCancel(t.Context())
	second := make(chan error, 1)
	go func() {
		_, err := c.Handle(ctx, &sharedosv1.HandleRequest{Tool: "fx.echo", ArgumentsJson: []byte(`{"text":"b"}`)})
		second <- err
	}()
	cancel()
	if err := <-second; status.Code(err) != codes.Canceled {
		t.Errorf("the waiting call: %v, want Canceled", err)
	}
	select {
	case err := <-first:
		t.Fatalf("the handshake ended before the waiting call could leave: %v", err)
	default:
	}
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	err = <-first
	if status.Code(err) != codes.Canceled || !strings.Contains(err.Error(), "initialize") {
		t.Errorf("the call whose handshake the close ended: %v, want its initialize Canceled", err)
	}
}
