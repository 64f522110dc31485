package pgdb

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/attribute"

	"github.com/sharedos/toolshare/services/platform/telemetry"
)

// Group sends the single-statement requests of concurrent callers to
// PostgreSQL together (group commit): while a batch is in flight, the
// statements that arrive queue, and the next batch carries all of them in one
// round trip and one implicit transaction — one commit, one WAL flush, for
// many callers. A caller alone waits for nothing: its statement leaves at
// once, as a batch of one. groupFlushes is 1: one batch in flight carries the
// most statements per commit, and two batches never wait on each other's locks. Do returns only once the batch that carried the
// statement has committed, so a write it reports done is as durable as one
// run alone.
//
// A batch is all or nothing. When the server refuses one statement it rolls
// the whole batch back (an error the server answered: nothing committed), and
// each statement then runs again alone, so one bad statement fails only its
// own caller. Any other failure (the connection lost mid-batch) is every
// caller's, in doubt as it would be alone.
//
// Each caller's statement is its own client span, as in the Tracer, with the
// batch size; the batch itself runs outside any one caller's trace.
type Group struct {
	pool   *pgxpool.Pool
	tracer *Tracer

	mu       sync.Mutex
	queue    []*job
	inflight int
}

// groupFlushes is how many batches one group keeps in flight. One: measured
// against two with the kernel benchmark on PostgreSQL (c=16), batches of ≈ 4.9
// statements against ≈ 2.6, and ≈ 20 % more calls per second.
const groupFlushes = 1

// groupBatch bounds one batch.
const groupBatch = 256

// groupTimeout bounds a batch whose callers set no deadline.
const groupTimeout = 30 * time.Second

// NewGroup returns a group sending its batches on pool.
func NewGroup(pool *pgxpool.Pool) *Group {
	t, _ := pool.Config().ConnConfig.Tracer.(*Tracer)
	return &Group{pool: pool, tracer: t}
}

// Stmt is one statement a Group runs, summarised once for its spans.
type Stmt struct {
	sql, op, collection string
}

// NewStmt returns the statement sql.
func NewStmt(sql string) Stmt {
	op, collection := summarize(sql)
	return Stmt{sql: sql, op: op, collection: collection}
}

// errNotSent is a statement withdrawn before any batch carried it.
type errNotSent struct{ err error }

func (e errNotSent) Error() string     { return "not sent: " + e.err.Error() }
func (e errNotSent) Unwrap() error     { return e.err }
func (e errNotSent) SafeToRetry() bool { return true } // pgconn.SafeToRetry: nothing reached the server

type job struct {
	ctx  context.Context // the caller's, for the batch's deadline
	st   Stmt
	args []any
	read func(pgx.Row) (any, error) // nil: an Exec

	// Written by the batch, read by the caller after done.
	done  chan struct{}
	taken bool // guarded by Group.mu
	val   any
	tag   pgconn.CommandTag
	err   error
	size  int
}

// QueryRow runs st with args in the next batch and returns what read makes
// of its row; pgx.ErrNoRows from read is returned as it is. read runs on the
// batch's goroutine and must keep to the row it is given.
func QueryRow[T any](ctx context.Context, g *Group, st Stmt, args []any, read func(pgx.Row) (T, error)) (T, error) {
	var zero T
	v, _, err := g.do(ctx, st, args, func(row pgx.Row) (any, error) { return read(row) })
	if v == nil {
		return zero, err
	}
	return v.(T), err
}

// Exec runs st with args in the next batch and returns its command tag.
func (g *Group) Exec(ctx context.Context, st Stmt, args ...any) (pgconn.CommandTag, error) {
	_, tag, err := g.do(ctx, st, args, nil)
	return tag, err
}

func (g *Group) do(ctx context.Context, st Stmt, args []any, read func(pgx.Row) (any, error)) (any, pgconn.CommandTag, error) {
	if err := ctx.Err(); err != nil {
		return nil, pgconn.CommandTag{}, errNotSent{err}
	}
	sctx := ctx
	if g.tracer != nil {
		sctx = g.tracer.start(ctx, st.op, st.collection)
	}
	j := &job{ctx: ctx, st: st, args: args, read: read, done: make(chan struct{})}
	g.mu.Lock()
	g.queue = append(g.queue, j)
	if g.inflight < groupFlushes {
		g.inflight++
		go g.run(g.take())
	}
	g.mu.Unlock()
	var err error
	select {
	case <-j.done:
		err = j.err
	case <-ctx.Done():
		g.mu.Lock()
		if !j.taken {
			g.queue = slices.DeleteFunc(g.queue, func(q *job) bool { return q == j })
			err = errNotSent{ctx.Err()}
		} else {
			// A batch carries it: whether it commits is not known here.
			err = ctx.Err()
		}
		g.mu.Unlock()
		end(sctx, err)
		return nil, pgconn.CommandTag{}, err
	}
	if span, ok := ownSpan(sctx); ok {
		span.SetAttributes(attribute.Int(telemetry.AttrDBBatchSize, j.size))
	}
	end(sctx, err)
	return j.val, j.tag, err
}

// take removes the next batch from the queue; g.mu is held.
func (g *Group) take() []*job {
	n := min(len(g.queue), groupBatch)
	batch := slices.Clone(g.queue[:n])
	g.queue = slices.Delete(g.queue, 0, n)
	for _, j := range batch {
		j.taken = true
	}
	return batch
}

// run sends batch, then what queued meanwhile, until nothing waits; then it
// gives the slot back. It runs on a goroutine of its own, so a caller whose
// context ends stops waiting at once.
func (g *Group) run(batch []*job) {
	for {
		g.flush(batch)
		g.mu.Lock()
		if len(g.queue) == 0 {
			g.inflight--
			g.mu.Unlock()
			return
		}
		batch = g.take()
		g.mu.Unlock()
	}
}

// flush runs batch as one pgx batch and hands every job its answer.
func (g *Group) flush(batch []*job) {
	defer func() {
		for _, j := range batch {
			close(j.done)
		}
	}()
	err := g.send(batch)
	var pgErr *pgconn.PgError
	if err != nil && len(batch) > 1 && errors.As(err, &pgErr) {
		// The server refused a statement and rolled the batch back: each
		// runs again alone, so the refusal is only its own. A statement's
		// own "no rows" stays in j.err (send keeps it there) unless its
		// rerun failed.
		for _, j := range batch {
			if err := g.send([]*job{j}); err != nil {
				j.err = err
			}
		}
		return
	}
	for _, j := range batch {
		if j.err == nil || err != nil {
			j.err = err
		}
	}
}

// send runs batch in one round trip; a job's own "no rows" stays in j.err
// when the batch succeeds.
func (g *Group) send(batch []*job) error {
	ctx, cancel := batchContext(batch)
	defer cancel()
	b := &pgx.Batch{}
	for _, j := range batch {
		j.val, j.tag, j.err, j.size = nil, pgconn.CommandTag{}, nil, len(batch)
		q := b.Queue(j.st.sql, j.args...)
		if j.read == nil {
			q.Exec(func(ct pgconn.CommandTag) error { j.tag = ct; return nil })
			continue
		}
		q.QueryRow(func(row pgx.Row) error {
			v, err := j.read(row)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
			j.val, j.err = v, err
			return nil
		})
	}
	return g.pool.SendBatch(ctx, b).Close()
}

// batchContext is bounded by the latest deadline among the batch's callers
// (groupTimeout when one has none); no one caller's cancellation stops the
// others' statements.
func batchContext(batch []*job) (context.Context, context.CancelFunc) {
	var latest time.Time
	for _, j := range batch {
		d, ok := j.ctx.Deadline()
		if !ok {
			latest = time.Now().Add(groupTimeout)
			break
		}
		if d.After(latest) {
			latest = d
		}
	}
	return context.WithDeadline(context.Background(), latest)
}
