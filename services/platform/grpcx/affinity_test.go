package grpcx_test

import (
	"context"
	"net"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"

	"github.com/sharedos/toolshare/services/platform/grpcx"
)

// replicas is n health servers on loopback that count the calls each took.
type replicas struct {
	mu    sync.Mutex
	addrs []string
	hits  map[string]int
}

func startReplicas(t *testing.T, n int) *replicas {
	t.Helper()
	r := &replicas{hits: map[string]int{}}
	for range n {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := lis.Addr().String()
		srv := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			r.mu.Lock()
			r.hits[addr]++
			r.mu.Unlock()
			return h(ctx, req)
		}))
		healthpb.RegisterHealthServer(srv, health.NewServer())
		go func() { _ = srv.Serve(lis) }()
		t.Cleanup(srv.Stop)
		r.addrs = append(r.addrs, addr)
	}
	return r
}

func (r *replicas) took() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for k, v := range r.hits {
		out[k] = v
		r.hits[k] = 0
	}
	return out
}

// Calls spread over every ready replica; the calls of a context with an
// Affinity all go to the replica its first call went to, or to the one it
// names while this connection has it.
func TestAffinityKeepsAContextOnOneReplica(t *testing.T) {
	reps := startReplicas(t, 3)
	res := manual.NewBuilderWithScheme("affinity")
	var addrs []resolver.Address
	for _, a := range reps.addrs {
		addrs = append(addrs, resolver.Address{Addr: a})
	}
	res.InitialState(resolver.State{Addresses: addrs})
	cc, err := grpcx.Dial(res.Scheme()+":///kernel", grpc.WithResolvers(res))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	hc := healthpb.NewHealthClient(cc)
	check := func(ctx context.Context) {
		t.Helper()
		if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	// Until every replica is ready, round robin covers only some: call
	// until each has taken one (a condition, bounded by the test's end).
	seen := map[string]bool{}
	for len(seen) < len(reps.addrs) {
		if t.Context().Err() != nil {
			t.Fatalf("calls reached only %v", seen)
		}
		check(t.Context())
		for a, n := range reps.took() {
			if n > 0 {
				seen[a] = true
			}
		}
	}
	// All ready: without an affinity, 30 calls go 10 to each.
	for range 30 {
		check(t.Context())
	}
	if got := reps.took(); len(got) != 3 || got[reps.addrs[0]] != 10 || got[reps.addrs[1]] != 10 || got[reps.addrs[2]] != 10 {
		t.Errorf("round robin: %v", got)
	}
	ctx, a := grpcx.WithAffinity(t.Context(), "")
	for range 12 {
		check(ctx)
	}
	got := reps.took()
	if a.Addr() == "" || got[a.Addr()] != 12 {
		t.Errorf("an affinity's calls went %v (its address %q)", got, a.Addr())
	}
	// An address reported by an earlier call (another pod's state) holds.
	ctx, _ = grpcx.WithAffinity(t.Context(), reps.addrs[2])
	for range 5 {
		check(ctx)
	}
	if got := reps.took(); got[reps.addrs[2]] != 5 {
		t.Errorf("a named address: %v", got)
	}
	// One this connection does not have (gone, or another connection's)
	// falls back to round robin and is kept.
	ctx, a = grpcx.WithAffinity(t.Context(), "127.0.0.1:1")
	for range 3 {
		check(ctx)
	}
	if got := reps.took(); a.Addr() != "127.0.0.1:1" || got[reps.addrs[0]] != 1 || got[reps.addrs[1]] != 1 || got[reps.addrs[2]] != 1 {
		t.Errorf("an unknown address: %v, kept %q", got, a.Addr())
	}
	if grpcx.AffinityFrom(t.Context()) != nil || grpcx.AffinityFrom(ctx) != a {
		t.Error("AffinityFrom")
	}
}
