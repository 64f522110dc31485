package bridgetest

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sharedos/toolshare/bridge-svc/internal/app"
	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
)

// Bridge is a running bridge and a client of its BridgeService.
type Bridge struct {
	App    *app.App
	Client sharedosv1.BridgeServiceClient
	// URL is the public base URL.
	URL string
	// Stop begins the bridge's shutdown (as its process's signal does).
	Stop func()
}

// AllowedOrigin is the one Origin test bridges allow.
const AllowedOrigin = "https://app.example"

// Start runs a bridge on loopback ports against the fakes at fakesAddr
// (catalog and kernel), with the lease store at dsn ("" = memory). It stops
// at test cleanup.
func Start(t testing.TB, fakesAddr, dsn string, tweak ...func(*app.Config)) *Bridge {
	t.Helper()
	cfg := app.Config{
		Listen: "127.0.0.1:0", HTTPListen: "127.0.0.1:0",
		Catalog: fakesAddr, Kernel: fakesAddr, DatabaseURL: dsn,
		AllowedOrigins: []string{AllowedOrigin},
		MaxBodyBytes:   4 << 20, DefaultTTL: 15 * time.Minute, SweepInterval: time.Hour,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	for _, f := range tweak {
		f(&cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	a, err := cfg.Complete(ctx)
	if err != nil {
		cancel()
		t.Fatalf("bridge Complete: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	cc, err := grpc.NewClient(a.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cc.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("bridge Run: %v", err)
		}
	})
	return &Bridge{App: a, Client: sharedosv1.NewBridgeServiceClient(cc), URL: a.PublicURL(), Stop: cancel}
}

// OpenRequest is a valid OpenTurnRequest for principal alice.
func OpenRequest() *sharedosv1.OpenTurnRequest {
	return &sharedosv1.OpenTurnRequest{
		Context: &sharedosv1.AccessContext{Principal: "alice", Tenant: "acme", Roles: []string{"engineer"}},
		Policy: &sharedosv1.ToolPolicy{
			Mode: sharedosv1.PolicyMode_POLICY_MODE_STRICT, HarnessLocal: []string{"patch", "shell"},
		},
		Harness: &sharedosv1.HarnessIdentity{
			Name: "test-harness", Version: "1.0", McpSupport: sharedosv1.McpSupport_MCP_SUPPORT_NATIVE,
		},
		DeclaredModel: "fake-model",
		Ttl:           durationpb.New(10 * time.Minute),
	}
}

// Open opens a turn with OpenRequest (modified by tweak).
func (b *Bridge) Open(t testing.TB, tweak ...func(*sharedosv1.OpenTurnRequest)) *sharedosv1.TurnLease {
	t.Helper()
	req := OpenRequest()
	for _, f := range tweak {
		f(req)
	}
	lease, err := b.Client.OpenTurn(context.Background(), req)
	if err != nil {
		t.Fatalf("OpenTurn: %v", err)
	}
	return lease
}
