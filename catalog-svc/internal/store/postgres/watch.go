package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/proto"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"

	"github.com/sharedos/toolshare/catalog-svc/internal/store"
)

// Watch implements store.Store. It LISTENs on a dedicated connection (not
// one of the pool's, which would be lost to every other query) and returns
// once LISTEN is active. After a connection failure it reconnects with
// backoff and pushes store.AllChanged: notifications sent while it was
// disconnected are gone, so the consumer must reload. A batch this Store
// wrote is not in its feed (ownBatches).
func (s *Store) Watch(ctx context.Context) (*store.Feed, error) {
	conn, err := s.listen(ctx)
	if err != nil {
		return nil, err
	}
	feed := store.NewFeed()
	stop := s.own.watch(feed)
	go func() {
		defer stop()
		s.follow(ctx, conn, feed)
	}()
	return feed, nil
}

func (s *Store) listen(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return nil, fmt.Errorf("postgres: change feed connect: %w", err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+Channel); err != nil {
		_ = conn.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("postgres: LISTEN %s: %w", Channel, err)
	}
	return conn, nil
}

func (s *Store) follow(ctx context.Context, conn *pgx.Conn, feed *store.Feed) {
	defer func() {
		if conn != nil {
			closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			_ = conn.Close(closeCtx)
			cancel()
		}
	}()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err == nil {
			if n.Payload != store.AllChanged || !s.own.skip(feed, n.PID) {
				feed.Push(n.Payload)
			}
			continue
		}
		if ctx.Err() != nil {
			return
		}
		s.log.WarnContext(ctx, "catalog change feed lost its connection; reconnecting", "err", err)
		_ = conn.Close(context.WithoutCancel(ctx))
		conn = nil
		delay := s.reconnectMin
		for conn == nil {
			select {
			case <-ctx.Done():
				return
			case <-time.After(delay):
			}
			if conn, err = s.listen(ctx); err != nil {
				conn = nil
				s.log.WarnContext(ctx, "catalog change feed reconnect failed", "err", err, "retry_in", delay)
				delay = min(2*delay, s.reconnectMax)
			}
		}
		// Listening again: registrations from before may have lost their
		// notice with the old connection; the reload covers them.
		s.own.forget(feed)
		feed.Push(store.AllChanged)
	}
}

func cloneReg(r *sharedosv1.ToolRegistration) *sharedosv1.ToolRegistration {
	return proto.Clone(r).(*sharedosv1.ToolRegistration)
}
