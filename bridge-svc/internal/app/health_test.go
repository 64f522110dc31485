package app_test

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/sharedos/toolshare/bridge-svc/internal/app"
)

func TestHealthNames(t *testing.T) {
	f := newFixture(t)
	cc, err := grpc.NewClient(f.bridge.App.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	h := healthpb.NewHealthClient(cc)
	for _, name := range []string{"", "liveness", app.HealthService} {
		resp, err := h.Check(context.Background(), &healthpb.HealthCheckRequest{Service: name})
		if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health %q = %v, %v", name, resp, err)
		}
	}
}
