package pgdb

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Listen LISTENs on channel with a connection of its own (taken from pool,
// closed — not returned — when it ends), calls listening once it hears
// every notification sent from then on, then f with each payload, until
// ctx is done (nil) or the connection fails.
func Listen(ctx context.Context, pool *pgxpool.Pool, channel string, listening func(), f func(payload string)) error {
	pc, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("listen %s: %w", channel, err)
	}
	conn := pc.Hijack()
	defer conn.Close(context.WithoutCancel(ctx)) //nolint:errcheck // the listen has ended either way
	if _, err := conn.Exec(ctx, "LISTEN "+channel); err != nil {
		return fmt.Errorf("listen %s: %w", channel, err)
	}
	listening()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("listen %s: %w", channel, err)
		}
		f(n.Payload)
	}
}
