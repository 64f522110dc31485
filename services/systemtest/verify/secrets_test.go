//go:build verify

package verify

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestSecretsNeverLeak: the turn's bearer token, a canary bearer and a
// canary argument value (in arguments of succeeded, denied, failed and
// invalid calls, and in _meta) never appear in any service's log output
// (debug level), in operation or lease rows, or in the gRPC metadata a
// handler receives. Argument values reach the handler only as arguments.
func TestSecretsNeverLeak(t *testing.T) {
	sink := startOTLPSink(t)
	s := startStack(t, stackOptions{env: sink.env()})
	tr := s.open("alice")
	canaryBearer := "canary-bearer-" + randHex(16)
	canaryArg := "CANARY-ARG-" + randHex(16)
	checkNoSecrets(t, s, sink, tr, canaryBearer, canaryArg, func() {
		secretCalls(t, s, tr, canaryBearer, canaryArg)
	})
}

// TestResourceArgumentsOnlyAsDigests: invariant 11 says argument values
// appear in logs and records only as digests — including the argument a
// requirement turns into the resource (here the path).
func TestResourceArgumentsOnlyAsDigests(t *testing.T) {
	sink := startOTLPSink(t)
	s := startStack(t, stackOptions{env: sink.env()})
	tr := s.open("alice")
	canary := "CANARY-PATH-" + randHex(16)
	checkNoSecrets(t, s, sink, tr, "canary-bearer-"+randHex(16), canary, func() {
		expectOutcome(t, mustCall(t, tr, "verify.echo", `{"path":"/private/`+canary+`"}`), "denied", "permission_denied")
		expectOutcome(t, mustCall(t, tr, "verify.echo", `{"path":"/public/`+canary+`"}`), "succeeded", "")
	})
}

func secretCalls(t *testing.T, s *stack, tr turn, canaryBearer, canaryArg string) {

	// A canary bearer: refused, but it was sent.
	if r := do(t, rawReq{url: tr.URL, token: canaryBearer, body: modernCall(1, "verify.echo", `{"path":"/public/x"}`), modern: true}); r.status != 401 {
		t.Fatalf("canary bearer: HTTP %d", r.status)
	}
	metaCall := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"verify.echo","arguments":{"path":"/public/x","value":"` + canaryArg + `"},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},` +
		`"io.modelcontextprotocol/clientInfo":{"name":"verify","version":"1"},"io.verify/canary":"` + canaryArg + `","authorization":"Bearer ` + canaryBearer + `"}}}`
	if r := do(t, rawReq{url: tr.URL, token: tr.Token, body: metaCall, modern: true}); r.status != 200 {
		t.Fatalf("call with canary _meta: HTTP %d %s", r.status, r.body)
	}
	calls := []struct{ tool, args, outcome string }{
		{"verify.echo", `{"path":"/public/x","value":"` + canaryArg + `"}`, "succeeded/"},
		{"verify.echo", `{"path":"/private/a.txt","value":"` + canaryArg + `"}`, "denied/permission_denied"},
		{"verify.echo", `{"path":"/public/x","value":"fail","extra":"` + canaryArg + `"}`, "failed/invalid_arguments"},
		{"verify.echo", `{"path":"/public/x","value":["` + canaryArg + `"]}`, "failed/invalid_arguments"},
		{"verify.echo", `{"path":"/public/x","value":"fail"}`, "failed/handler_error"},
		{"verify.boom", `{"path":"/public/x"}`, "failed/authz_error"},
		{"files.write", `{"path":"/public/canary.txt","content":"` + canaryArg + `"}`, "succeeded/"},
		{"files.read", `{"path":"/public/canary.txt"}`, "succeeded/"},
		{"nope." + "tool", `{"secret":"` + canaryArg + `"}`, "denied/tool_unavailable"},
	}
	for _, c := range calls {
		r := mustCall(t, tr, c.tool, c.args)
		st, code, _ := strings.Cut(c.outcome, "/")
		expectOutcome(t, r, st, code)
	}
}

// checkNoSecrets runs calls, then searches every row, log and handler
// metadata for the token and the canaries.
func checkNoSecrets(t *testing.T, s *stack, sink *otlpSink, tr turn, canaryBearer, canaryArg string, calls func()) {
	calls()
	s.waitSettled(tr.ID, 10*time.Second)
	secrets := map[string]string{"turn token": tr.Token, "canary bearer": canaryBearer, "canary argument": canaryArg}

	// Operation, lease and pinned-catalogue rows, every column as text.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, q := range []string{
		`SELECT row_to_json(o)::text FROM catalog.operations o`,
		`SELECT row_to_json(l)::text FROM bridge.leases l`,
		`SELECT row_to_json(c)::text FROM bridge.catalogues c`,
	} {
		rows, err := s.db.Query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for rows.Next() {
			var row string
			if err := rows.Scan(&row); err != nil {
				t.Fatal(err)
			}
			n++
			for what, v := range secrets {
				if strings.Contains(row, v) {
					var cols map[string]any
					_ = json.Unmarshal([]byte(row), &cols)
					for k, cv := range cols {
						if strings.Contains(fmt.Sprint(cv), v) {
							t.Errorf("%s found in column %s of %q: %s", what, k, q, truncate(fmt.Sprint(cv), 200))
						}
					}
				}
			}
		}
		rows.Close()
		if n == 0 {
			t.Errorf("%s returned no rows: nothing was checked", q)
		}
	}
	// Spans and metrics: stop the services (flushing their exporters), then
	// search every OTLP export they sent.
	for _, p := range s.procs() {
		p.Stop(syscall.SIGTERM, 10*time.Second)
	}
	if sink.count("/v1/traces") == 0 || sink.count("/v1/metrics") == 0 {
		t.Errorf("OTLP sink got %d trace and %d metric exports: nothing was checked", sink.count("/v1/traces"), sink.count("/v1/metrics"))
	}
	for what, v := range secrets {
		if where := sink.find(v); where != "" {
			t.Errorf("%s found in an OTLP export (%s)", what, where)
		}
	}
	// Every service's log (debug level).
	for _, p := range append([]*proc{s.Authz, s.Files, s.Catalog}, s.Bridges...) {
		log := p.Log.String()
		if log == "" {
			t.Errorf("%s wrote no log: nothing was checked", p.Name)
		}
		for what, v := range secrets {
			if i := strings.Index(log, v); i >= 0 {
				t.Errorf("%s found in %s's log: …%s…", what, p.Name, log[max(0, i-200):min(len(log), i+100)])
			}
		}
	}
	// What the handler was given besides its arguments.
	handled := s.provider.snapshot()
	if len(handled) == 0 {
		t.Fatal("no handler call observed")
	}
	for _, h := range handled {
		for k, vs := range h.Metadata {
			for _, v := range vs {
				for what, sv := range secrets {
					if strings.Contains(v, sv) || strings.Contains(k, sv) {
						t.Errorf("%s found in handler metadata %s", what, k)
					}
				}
			}
		}
		if strings.Contains(string(h.Args), tr.Token) || strings.Contains(string(h.Args), canaryBearer) {
			t.Errorf("a bearer token reached handler arguments")
		}
	}
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// otlpSink is an OTLP/HTTP receiver on loopback that keeps every export
// body (protobuf: strings are stored as plain UTF-8, so a substring search
// finds them).
type otlpSink struct {
	srv  *httptest.Server
	mu   sync.Mutex
	body map[string][][]byte // by path
}

func startOTLPSink(t *testing.T) *otlpSink {
	t.Helper()
	o := &otlpSink{body: map[string][][]byte{}}
	o.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var rd io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			rd = zr
		}
		b, _ := io.ReadAll(io.LimitReader(rd, 64<<20))
		o.mu.Lock()
		o.body[r.URL.Path] = append(o.body[r.URL.Path], b)
		o.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(o.srv.Close)
	return o
}

func (o *otlpSink) env() []string {
	return []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + o.srv.URL, "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
		"OTEL_TRACES_SAMPLER=always_on", "OTEL_BSP_SCHEDULE_DELAY=200", "OTEL_METRIC_EXPORT_INTERVAL=500",
	}
}

func (o *otlpSink) count(path string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.body[path])
}

func (o *otlpSink) find(v string) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	for path, bs := range o.body {
		for _, b := range bs {
			if i := bytes.Index(b, []byte(v)); i >= 0 {
				return fmt.Sprintf("%s: %q", path, b[max(0, i-120):min(len(b), i+len(v)+20)])
			}
		}
	}
	return ""
}
