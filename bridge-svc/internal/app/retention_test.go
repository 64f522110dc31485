package app_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sharedos/toolshare/bridge-svc/internal/app"
	"github.com/sharedos/toolshare/bridge-svc/internal/bridgetest"
	"github.com/sharedos/toolshare/bridge-svc/migrations"
	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/platform/pgdb/pgtest"
)

// TestSweeperPurgesExpiredLeases: with a retention shorter than a sweep, the
// running bridge's sweeper deletes an expired lease from PostgreSQL, acting
// as the service role (which may DELETE), while an open lease stays.
func TestSweeperPurgesExpiredLeases(t *testing.T) {
	dsn := pgtest.NewDatabase(t, migrations.Up)
	catalog, kernel := &bridgetest.FakeCatalog{}, bridgetest.NewFakeKernel()
	catalog.SetTools(bridgetest.DefaultTools())
	b := bridgetest.Start(t, bridgetest.ServeFakes(t, catalog, kernel), dsn, func(c *app.Config) {
		c.SweepInterval, c.LeaseRetention, c.DatabaseRole = 20*time.Millisecond, time.Nanosecond, migrations.ServiceRole
	})
	ctx := context.Background()
	open := b.Open(t)
	expiring := b.Open(t, func(r *sharedosv1.OpenTurnRequest) { r.Ttl = durationpb.New(time.Millisecond) })
	// Poll until the sweeper has purged; the bound is a safety net
	// against hangs, not a timing assertion.
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := b.Client.GetTurn(ctx, &sharedosv1.GetTurnRequest{TurnId: expiring.GetTurnId()})
		if status.Code(err) == codes.NotFound {
			break
		}
		if err != nil {
			t.Fatalf("GetTurn(expiring) = %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the sweeper never purged the expired lease")
		}
		time.Sleep(20 * time.Millisecond)
	}
	got, err := b.Client.GetTurn(ctx, &sharedosv1.GetTurnRequest{TurnId: open.GetTurnId()})
	if err != nil || got.GetState() != sharedosv1.TurnState_TURN_STATE_OPEN {
		t.Errorf("GetTurn(open) after the purge = %v, %v, want open", got, err)
	}
}
