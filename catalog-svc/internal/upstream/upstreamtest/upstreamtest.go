package upstreamtest

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/server"
)

// Rewritten serves s over Streamable HTTP behind a rewriter, returning its
// MCP endpoint and the rewrite: each answer's body has every from replaced
// by to from then on ("" from: as s wrote it). An upstream may send what
// mcp-go's server would never write.
func Rewritten(t testing.TB, s *server.MCPServer) (url string, rewrite func(from, to string)) {
	t.Helper()
	mcpSrv := server.NewStreamableHTTPServer(s)
	var mu sync.Mutex
	var from, to string
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		from, to := from, to
		mu.Unlock()
		if from == "" {
			mcpSrv.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		mcpSrv.ServeHTTP(rec, r)
		for k, v := range rec.Header() {
			if k != "Content-Length" {
				w.Header()[k] = v
			}
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write([]byte(strings.ReplaceAll(rec.Body.String(), from, to)))
	}))
	t.Cleanup(hs.Close)
	return hs.URL + "/mcp", func(f, t string) {
		mu.Lock()
		from, to = f, t
		mu.Unlock()
	}
}
