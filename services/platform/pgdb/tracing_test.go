package pgdb_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/sharedos/toolshare/services/platform/pgdb"
	"github.com/sharedos/toolshare/services/platform/pgdb/pgtest"
	"github.com/sharedos/toolshare/services/platform/telemetry"
)

// canary is an argument value no span may carry.
const canary = "CANARY-PGX-ARG-5b2e9c"

func tracedPool(t *testing.T, opts ...pgdb.TracerOption) (*pgxpool.Pool, *tracetest.InMemoryExporter, trace.Tracer) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	cfg, err := pgxpool.ParseConfig(pgtest.NewDatabase(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.Tracer = pgdb.NewTracer(append([]pgdb.TracerOption{pgdb.WithTracerProvider(tp), pgdb.WithDatabase(cfg.ConnConfig.Database)}, opts...)...)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool, exp, tp.Tracer("test")
}

func attrs(s sdktrace.ReadOnlySpan) map[string]attribute.Value {
	m := map[string]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[string(kv.Key)] = kv.Value
	}
	return m
}

// assertNoCanary fails when any exported span text contains canary.
func assertNoCanary(t *testing.T, spans tracetest.SpanStubs) {
	t.Helper()
	for _, s := range spans {
		texts := []string{s.Name, s.Status.Description}
		for _, kv := range s.Attributes {
			texts = append(texts, kv.Value.String())
		}
		for _, ev := range s.Events {
			texts = append(texts, ev.Name)
			for _, kv := range ev.Attributes {
				texts = append(texts, kv.Value.String())
			}
		}
		for _, txt := range texts {
			if strings.Contains(txt, canary) {
				t.Errorf("span %q carries the argument value: %q", s.Name, txt)
			}
		}
	}
}

func TestTracerSpans(t *testing.T) {
	pool, exp, tr := tracedPool(t)
	ctx, parent := tr.Start(context.Background(), "request")

	if _, err := pool.Exec(ctx, `CREATE TABLE public.items (id text PRIMARY KEY, n int)`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO public.items (id, n) VALUES ($1, 1)`, canary); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT n FROM "public"."items" WHERE id = $1`, canary).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `SELECT n FROM items WHERE id = $1`, "absent").Scan(&n); !errors.Is(err, pgx.ErrNoRows) {
		t.Fatalf("want ErrNoRows, got %v", err)
	}
	// A unique violation: PostgreSQL's message and detail quote the key.
	_, dupErr := pool.Exec(ctx, `INSERT INTO items (id, n) VALUES ($1, 2)`, canary)
	var pgErr *pgconn.PgError
	if !errors.As(dupErr, &pgErr) || pgErr.Code != "23505" || !strings.Contains(pgErr.Detail, canary) {
		t.Fatalf("duplicate insert: %v (want 23505 whose detail quotes the key)", dupErr)
	}
	// Invalid input syntax: the message itself quotes the argument.
	_, castErr := pool.Exec(ctx, `UPDATE items SET n = $1::int WHERE id = 'x'`, canary)
	if !errors.As(castErr, &pgErr) || !strings.Contains(pgErr.Message, canary) {
		t.Fatalf("bad cast: %v (want an error quoting the argument)", castErr)
	}
	b := &pgx.Batch{}
	b.Queue(`DELETE FROM items WHERE id = $1`, canary)
	b.Queue(`SELECT count(*) FROM items`)
	if err := pool.SendBatch(ctx, b).Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.CopyFrom(ctx, pgx.Identifier{"public", "items"}, []string{"id", "n"},
		pgx.CopyFromRows([][]any{{canary, 3}})); err != nil {
		t.Fatal(err)
	}
	parent.End()

	spans := exp.GetSpans()
	type want struct {
		name, op, collection string
		failed               bool
		sqlstate             string
	}
	wants := []want{
		{"CREATE", "CREATE", "", false, ""},
		{"INSERT public.items", "INSERT", "public.items", false, ""},
		{"SELECT public.items", "SELECT", "public.items", false, ""},
		{"SELECT items", "SELECT", "items", false, ""},
		{"INSERT items", "INSERT", "items", true, "23505"},
		{"UPDATE items", "UPDATE", "items", true, "22P02"},
		{"BATCH", "BATCH", "", false, ""},
		{"COPY public.items", "COPY", "public.items", false, ""},
	}
	var db []tracetest.SpanStub
	for _, s := range spans {
		if s.Name != "request" {
			db = append(db, s)
		}
	}
	if len(db) != len(wants) {
		var got []string
		for _, s := range db {
			got = append(got, s.Name)
		}
		t.Fatalf("got %d db spans %v, want %d", len(db), got, len(wants))
	}
	for i, w := range wants {
		s := db[i].Snapshot()
		a := attrs(s)
		if s.Name() != w.name {
			t.Errorf("span %d name %q, want %q", i, s.Name(), w.name)
		}
		if s.SpanKind() != trace.SpanKindClient {
			t.Errorf("%s: kind %v, want client", w.name, s.SpanKind())
		}
		if s.Parent().SpanID() != parent.SpanContext().SpanID() || s.SpanContext().TraceID() != parent.SpanContext().TraceID() {
			t.Errorf("%s: not a child of the request span", w.name)
		}
		if a[telemetry.AttrDBSystemName].AsString() != telemetry.DBSystemPostgreSQL {
			t.Errorf("%s: %s = %q", w.name, telemetry.AttrDBSystemName, a[telemetry.AttrDBSystemName].AsString())
		}
		if a[telemetry.AttrDBOperationName].AsString() != w.op {
			t.Errorf("%s: %s = %q, want %q", w.name, telemetry.AttrDBOperationName, a[telemetry.AttrDBOperationName].AsString(), w.op)
		}
		if got := a[telemetry.AttrDBCollectionName].AsString(); got != w.collection {
			t.Errorf("%s: %s = %q, want %q", w.name, telemetry.AttrDBCollectionName, got, w.collection)
		}
		if !strings.HasPrefix(a[telemetry.AttrDBNamespace].AsString(), "sharedos_test_") {
			t.Errorf("%s: %s = %q, want the test database", w.name, telemetry.AttrDBNamespace, a[telemetry.AttrDBNamespace].AsString())
		}
		if failed := s.Status().Code == codes.Error; failed != w.failed {
			t.Errorf("%s: status %v, want error=%v", w.name, s.Status(), w.failed)
		}
		if w.failed {
			if got := a[telemetry.AttrDBResponseStatusCode].AsString(); got != w.sqlstate {
				t.Errorf("%s: %s = %q, want %q", w.name, telemetry.AttrDBResponseStatusCode, got, w.sqlstate)
			}
			if s.Status().Description != "SQLSTATE "+w.sqlstate {
				t.Errorf("%s: status description %q, want only the SQLSTATE", w.name, s.Status().Description)
			}
		}
		if w.op == "BATCH" && a[telemetry.AttrDBBatchSize].AsInt64() != 2 {
			t.Errorf("batch size = %v, want 2", a[telemetry.AttrDBBatchSize])
		}
	}
	assertNoCanary(t, spans)
}

func TestTracerBatchFailureMarksBatch(t *testing.T) {
	pool, exp, tr := tracedPool(t)
	ctx, parent := tr.Start(context.Background(), "request")
	b := &pgx.Batch{}
	b.Queue(`SELECT 1`)
	b.Queue(`SELECT $1::int`, canary)
	if err := pool.SendBatch(ctx, b).Close(); err == nil {
		t.Fatal("batch with a bad cast succeeded")
	}
	parent.End()
	var batch *tracetest.SpanStub
	for i, s := range exp.GetSpans() {
		if s.Name == "BATCH" {
			batch = &exp.GetSpans()[i]
		}
	}
	if batch == nil {
		t.Fatal("no BATCH span")
	}
	if batch.Status.Code != codes.Error || batch.Status.Description != "SQLSTATE 22P02" {
		t.Errorf("batch status %+v, want Error \"SQLSTATE 22P02\"", batch.Status)
	}
	assertNoCanary(t, exp.GetSpans())
}

func TestTracerRootSpans(t *testing.T) {
	t.Run("off by default", func(t *testing.T) {
		pool, exp, _ := tracedPool(t)
		if _, err := pool.Exec(context.Background(), `SELECT 1`); err != nil {
			t.Fatal(err)
		}
		if n := len(exp.GetSpans()); n != 0 {
			t.Errorf("a statement without a parent span produced %d spans, want 0", n)
		}
	})
	t.Run("on", func(t *testing.T) {
		pool, exp, _ := tracedPool(t, pgdb.WithRootSpans(true))
		if _, err := pool.Exec(context.Background(), `SELECT 1`); err != nil {
			t.Fatal(err)
		}
		spans := exp.GetSpans()
		if len(spans) != 1 || spans[0].Name != "SELECT" || spans[0].Parent.IsValid() {
			t.Errorf("spans = %v, want one root SELECT span", spans)
		}
	})
	t.Run("the caller's span is never ended", func(t *testing.T) {
		pool, exp, tr := tracedPool(t)
		// end must close the tracer's own span, never the caller's.
		ctx, parent := tr.Start(context.Background(), "request")
		if _, err := pool.Exec(ctx, `SELECT 1`); err != nil {
			t.Fatal(err)
		}
		if !parent.IsRecording() {
			t.Fatal("the query ended the caller's span")
		}
		parent.End()
		if n := len(exp.GetSpans()); n != 2 {
			t.Errorf("got %d spans, want the request and its SELECT", n)
		}
	})
}

// TestOpenInstallsTracer checks that pools from Open are traced through the
// global provider (the one telemetry.Setup installs). It replaces the
// global provider, so it does not run in parallel.
func TestOpenInstallsTracer(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	otel.SetTracerProvider(tp)
	t.Cleanup(func() {
		otel.SetTracerProvider(tracenoop.NewTracerProvider())
		_ = tp.Shutdown(context.Background())
	})
	pool, err := pgdb.Open(context.Background(), pgtest.NewDatabase(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	ctx, parent := tp.Tracer("test").Start(context.Background(), "request")
	if _, err := pool.Exec(ctx, `SELECT 1`); err != nil {
		t.Fatal(err)
	}
	parent.End()
	var names []string
	for _, s := range exp.GetSpans() {
		names = append(names, s.Name)
	}
	if strings.Join(names, ",") != "SELECT,request" {
		t.Errorf("spans %v, want [SELECT request]", names)
	}
}

// TestTracerSpanNames runs statements PostgreSQL accepts and checks the
// operation and table the span names are built from.
func TestTracerSpanNames(t *testing.T) {
	pool, exp, tr := tracedPool(t)
	ctx, parent := tr.Start(context.Background(), "request")
	for _, q := range []string{
		`CREATE TABLE "Odd Name" (id int)`,
		"-- leading comment\n/* block */ insert into \"Odd Name\" (id) values (1)",
		`SELECT (SELECT 1 FROM pg_class LIMIT 1), 'FROM x' FROM "Odd Name"`,
		`SELECT * FROM unnest(ARRAY[1,2])`,
		`SELECT $$ FROM y $$ AS s FROM pg_catalog.pg_class LIMIT 1`,
		`WITH x AS (SELECT 1) SELECT * FROM x`,
		`update only "Odd Name" set id = 2`,
		`DELETE FROM ONLY "Odd Name"`,
		`TRUNCATE TABLE "Odd Name"`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	parent.End()
	want := []string{
		"CREATE", "INSERT Odd Name", "SELECT Odd Name", "SELECT", "SELECT pg_catalog.pg_class",
		"WITH", "UPDATE Odd Name", "DELETE Odd Name", "TRUNCATE Odd Name", "request",
	}
	var got []string
	for _, s := range exp.GetSpans() {
		got = append(got, s.Name)
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("span names\n got %q\nwant %q", got, want)
	}
}
