package catalog_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/cataloghash"
	"github.com/sharedos/toolshare/services/platform/pgdb/pgtest"
	"github.com/sharedos/toolshare/services/platform/runner"

	"github.com/sharedos/toolshare/catalog-svc/internal/app"
	"github.com/sharedos/toolshare/catalog-svc/internal/catalog"
	"github.com/sharedos/toolshare/catalog-svc/internal/store"
	"github.com/sharedos/toolshare/catalog-svc/internal/store/postgres"
	"github.com/sharedos/toolshare/catalog-svc/migrations"
)

// corpus returns n generated managed tools shaped like the performance
// anchors' corpus: provider-qualified names, 4–6-property input schemas, an
// output schema, annotations and metadata; about 1.25 KB of canonical JSON
// each.
func corpus(n int) []*sharedosv1.ToolRegistration {
	out := make([]*sharedosv1.ToolRegistration, n)
	for i := range out {
		ns := fmt.Sprintf("prov%03d", i%100)
		name := fmt.Sprintf("%s.tool_%05d", ns, i)
		props := 4 + i%3
		var p []string
		for j := range props {
			p = append(p, fmt.Sprintf(`"arg%d": {"type": "string", "description": "Argument %d of %s: a value the provider needs.", "maxLength": 256}`, j, j, name))
		}
		out[i] = &sharedosv1.ToolRegistration{
			Name:             name,
			Description:      fmt.Sprintf("Tool %d of provider %s. Performs an operation on the provider's resources and returns a short result.\nUse it when the user asks for %s.", i, ns, name),
			InputSchemaJson:  []byte(`{"type": "object", "properties": {` + strings.Join(p, ", ") + `}, "required": ["arg0"], "additionalProperties": false}`),
			OutputSchemaJson: []byte(`{"type": "object", "properties": {"result": {"type": "string"}, "count": {"type": "integer"}}}`),
			AnnotationsJson:  []byte(fmt.Sprintf(`{"title": "Tool %d", "readOnlyHint": %t, "openWorldHint": false}`, i, i%2 == 0)),
			Metadata:         &sharedosv1.ToolMetadata{Namespace: ns, Source: "provider:" + ns},
			Class:            sharedosv1.ToolClass_TOOL_CLASS_MANAGED,
			Requirement:      &sharedosv1.Requirement{Action: "call", Resource: "res:{arg0}"},
			Handler:          &sharedosv1.HandlerRef{Target: "127.0.0.1:7404"},
		}
	}
	return out
}

// fixedFilter returns precomputed answers, one per FilterTools page (by the
// page's first tool), so the benchmark measures catalog-svc's own work, not
// the fake policy's.
type fixedFilter struct {
	byFirst map[string]*sharedosv1.FilterToolsResponse
}

// newFixedFilter answers each catalog.DefaultFilterPage page of names (all
// the catalogue's, sorted) with the allowed ones in it.
func newFixedFilter(names []string, allowed map[string]bool) fixedFilter {
	names = slices.Sorted(slices.Values(names))
	f := fixedFilter{byFirst: map[string]*sharedosv1.FilterToolsResponse{}}
	for start := 0; start < len(names); start += catalog.DefaultFilterPage {
		resp := &sharedosv1.FilterToolsResponse{}
		for _, n := range names[start:min(start+catalog.DefaultFilterPage, len(names))] {
			if allowed[n] {
				resp.AllowedTools = append(resp.AllowedTools, n)
			}
		}
		f.byFirst[names[start]] = resp
	}
	return f
}

func (f fixedFilter) FilterTools(_ context.Context, in *sharedosv1.FilterToolsRequest, _ ...grpc.CallOption) (*sharedosv1.FilterToolsResponse, error) {
	if len(in.GetTools()) == 0 {
		return &sharedosv1.FilterToolsResponse{}, nil
	}
	return f.byFirst[in.GetTools()[0].GetName()], nil
}

// threadCPU is the CPU time the calling OS thread has used. The box these
// benchmarks run on is shared, so wall time includes time other processes
// took from us; the thread's own CPU time does not (reported as cpu-ns/op).
func threadCPU() time.Duration {
	var ru syscall.Rusage
	const rusageThread = 1 // RUSAGE_THREAD (Linux)
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loopCPU runs body b.N times (b.Loop) on one locked OS thread and reports
// its CPU time per op next to the wall time.
func loopCPU(b *testing.B, body func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start := threadCPU()
	n := 0
	for b.Loop() {
		body()
		n++
	}
	b.ReportMetric(float64(threadCPU()-start)/float64(n), "cpu-ns/op")
}

var benchServices sync.Map // n → *catalog.Service

// benchService returns a started in-memory Service holding corpus(n), whose
// filter allows 80 % of the tools (every fifth one is hidden).
func benchService(b *testing.B, n int) *catalog.Service {
	if s, ok := benchServices.Load(n); ok {
		return s.(*catalog.Service)
	}
	regs := corpus(n)
	names, allowed := make([]string, len(regs)), map[string]bool{}
	for i, r := range regs {
		names[i] = r.GetName()
		if i%5 != 4 {
			allowed[r.GetName()] = true
		}
	}
	svc, err := catalog.New(catalog.Config{Store: memoryStore(), Filter: newFixedFilter(names, allowed)})
	if err != nil {
		b.Fatal(err)
	}
	// Not tied to b: the service is shared by the benchmark's reruns.
	if err := svc.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	if _, err := svc.RegisterBatch(context.Background(), regs); err != nil {
		b.Fatal(err)
	}
	benchServices.Store(n, svc)
	return svc
}

func BenchmarkListTools(b *testing.B) {
	actx := &sharedosv1.AccessContext{Principal: "alice", Tenant: "acme", Roles: []string{"engineer"}}
	for _, n := range []int{1000, 10000, 50000} {
		svc := benchService(b, n)
		b.Run(fmt.Sprintf("n=%d/visible=80pct/compute", n), func(b *testing.B) {
			b.ReportAllocs()
			loopCPU(b, func() {
				l, err := svc.ListTools(context.Background(), actx)
				if err != nil || len(l.Tools) != n*4/5 {
					b.Fatalf("ListTools = %d tools, %v", len(l.Tools), err)
				}
			})
		})
		// What gRPC adds on the server before the bytes leave: encoding
		// the response (the published tools and their canonical bytes).
		b.Run(fmt.Sprintf("n=%d/visible=80pct/compute+proto.Marshal", n), func(b *testing.B) {
			b.ReportAllocs()
			var size int
			for b.Loop() {
				l, err := svc.ListTools(context.Background(), actx)
				if err != nil {
					b.Fatal(err)
				}
				out, err := proto.Marshal(&sharedosv1.ListToolsResponse{Tools: l.Tools, CatalogHash: l.CatalogHash})
				if err != nil {
					b.Fatal(err)
				}
				size = len(out)
			}
			b.ReportMetric(float64(size), "resp-bytes")
		})
	}
}

func BenchmarkCatalogHash(b *testing.B) {
	const n = 10000
	svc := benchService(b, n)
	all, err := svc.ListTools(context.Background(), nil)
	if err != nil {
		b.Fatal(err)
	}
	entries := make([]cataloghash.Entry, len(all.Tools))
	total := 0
	for i, t := range all.Tools {
		entries[i] = cataloghash.Entry{Name: t.GetName(), Canonical: t.GetCanonicalJson()}
		total += len(t.GetCanonicalJson())
	}
	b.Logf("n=%d tools, %d canonical bytes (%.0f B/tool)", n, total, float64(total)/n)
	b.Run("n=10000/catalogHash_presorted_cache", func(b *testing.B) {
		b.SetBytes(int64(total))
		b.ReportAllocs()
		loopCPU(b, func() { _ = cataloghash.SumSorted(entries) })
	})
	// The physical floor: SHA-256 over the same canonical bytes, nothing else.
	b.Run("n=10000/sha256_only_same_bytes", func(b *testing.B) {
		b.SetBytes(int64(total))
		b.ReportAllocs()
		loopCPU(b, func() { shaOnly(entries) })
	})
	// Both in every iteration, timed separately, so load from other
	// processes hits both sides alike: the ratio is the number to read.
	b.Run("n=10000/ratio_interleaved", func(b *testing.B) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		var hashCPU, shaCPU time.Duration
		for b.Loop() {
			t0 := threadCPU()
			_ = cataloghash.SumSorted(entries)
			t1 := threadCPU()
			shaOnly(entries)
			hashCPU, shaCPU = hashCPU+t1-t0, shaCPU+threadCPU()-t1
		}
		b.ReportMetric(float64(hashCPU)/float64(shaCPU), "hash/sha256")
	})
}

func shaOnly(entries []cataloghash.Entry) {
	h := sha256.New()
	for _, e := range entries {
		h.Write(e.Canonical)
	}
	_ = h.Sum(nil)
}

// storedRecords returns regs as the service stores them (validated,
// canonical bytes cached), copied out of a service that is closed before it
// returns: the timed process holds what catalog-svc would, not a second
// catalogue (at catalog-svc's GOGC its 88 MB of live heap grew every
// batch's heap by some 350 MB).
func storedRecords(b *testing.B, regs []*sharedosv1.ToolRegistration) []store.Record {
	b.Helper()
	ctx := context.Background()
	prep, err := catalog.New(catalog.Config{Store: memoryStore()})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = prep.Close() }()
	if err := prep.Start(ctx); err != nil {
		b.Fatal(err)
	}
	if _, err := prep.RegisterBatch(ctx, regs); err != nil {
		b.Fatal(err)
	}
	all, err := prep.ListTools(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	recs := make([]store.Record, len(all.Tools))
	for i, t := range all.Tools {
		res, err := prep.Resolve(ctx, t.GetName())
		if err != nil {
			b.Fatal(err)
		}
		recs[i] = store.Record{Registration: proto.CloneOf(res.Registration),
			Canonical: slices.Clone(res.Published.GetCanonicalJson()), Digest: res.Digest}
	}
	return recs
}

// BenchmarkRegisterBatch registers 10,000 tools in one batch on PostgreSQL:
// a bare COPY of the same rows (issue 20's P5 baseline), the store's COPY
// path alone (the COPY and the change notice in one transaction), and
// the whole service call (validation, projection, the store's path and the
// cache update from the stored records), in that order in one run.
func BenchmarkRegisterBatch(b *testing.B) {
	const n = 10000
	// As catalog-svc serves: with its GOGC unless GOGC is set (ADR 0021).
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	runner.ApplyGCPercent(app.Command.GCPercent)
	dsn := pgtest.NewDatabase(b, migrations.Up)
	pool := openPool(b, dsn)
	st := postgres.New(pool)
	regs := corpus(n)
	recs := storedRecords(b, regs)
	truncate := func(b *testing.B) {
		b.StopTimer()
		if _, err := pool.Exec(context.Background(), "TRUNCATE catalog.tools"); err != nil {
			b.Fatal(err)
		}
		// Every iteration registers schemas the process has not compiled
		// yet (the corpus's shared output schema compiles once per batch).
		catalog.ForgetCompiledSchemas()
		b.StartTimer()
	}
	// The baseline the goal names (issue 20, P5): a bare COPY of the same
	// rows into the table — no transaction around it, no change notice.
	b.Run("n=10000/bare_COPY", func(b *testing.B) {
		cols, rows := postgres.Rows(recs)
		for b.Loop() {
			truncate(b)
			if got, err := pool.CopyFrom(context.Background(), pgx.Identifier{"catalog", "tools"}, cols, pgx.CopyFromRows(rows)); err != nil || got != n {
				b.Fatalf("CopyFrom = %d, %v", got, err)
			}
		}
		b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	})
	b.Run("n=10000/store.CreateBatch_COPY", func(b *testing.B) {
		for b.Loop() {
			truncate(b)
			if got, err := st.CreateBatch(context.Background(), recs); err != nil || len(got) != n {
				b.Fatalf("CreateBatch = %d, %v", len(got), err)
			}
		}
		b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	})
	svc := newService(b, st, nil)
	b.Run("n=10000/Service.RegisterBatch", func(b *testing.B) {
		for b.Loop() {
			truncate(b)
			if got, err := svc.RegisterBatch(context.Background(), regs); err != nil || len(got) != n {
				b.Fatalf("RegisterBatch = %d registrations, %v", len(got), err)
			}
		}
		b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	})
	// What another replica does when it hears of the batch: a full reload
	// (read every row, build the cache; schemas compile lazily).
	b.Run("n=10000/replica_full_reload", func(b *testing.B) {
		for b.Loop() {
			other, err := catalog.New(catalog.Config{Store: st})
			if err != nil {
				b.Fatal(err)
			}
			if err := other.Start(context.Background()); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if l, _ := other.ListTools(context.Background(), nil); len(l.Tools) != n {
				b.Fatalf("reloaded %d tools, want %d", len(l.Tools), n)
			}
			_ = other.Close()
			b.StartTimer()
		}
	})
}
