package grpcx

import (
	"context"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/balancer/base"
)

// BalancerName is the load balancing policy of every client Dial makes:
// round robin over the ready addresses, except that the calls of a context
// carrying an Affinity go to the address its first call went to while that
// address is ready. It keeps the rounds of one attempt on one kernel
// replica: an upstream MCP call parked between rounds lives in the memory
// of the replica that started it (ADR 0019).
const BalancerName = "sharedos_affine_round_robin"

func init() {
	balancer.Register(base.NewBalancerBuilder(BalancerName, affinePickerBuilder{}, base.Config{HealthCheck: true}))
}

// Affinity is the server address the calls of one context share.
type Affinity struct {
	mu   sync.Mutex
	addr string
}

type affinityKey struct{}

// WithAffinity returns ctx whose calls share one server address: addr
// when set (one an earlier Affinity reported), else the first call's.
func WithAffinity(ctx context.Context, addr string) (context.Context, *Affinity) {
	a := &Affinity{addr: addr}
	return context.WithValue(ctx, affinityKey{}, a), a
}

// AffinityFrom is ctx's Affinity, or nil.
func AffinityFrom(ctx context.Context) *Affinity {
	a, _ := ctx.Value(affinityKey{}).(*Affinity)
	return a
}

// Addr is the address the calls go to ("" before the first).
func (a *Affinity) Addr() string {
	if a == nil {
		return ""
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.addr
}

// Set makes addr the calls' address (the picker on a first call; tests standing for it).
func (a *Affinity) Set(addr string) {
	a.mu.Lock()
	a.addr = addr
	a.mu.Unlock()
}

type affinePickerBuilder struct{}

func (affinePickerBuilder) Build(info base.PickerBuildInfo) balancer.Picker {
	if len(info.ReadySCs) == 0 {
		return base.NewErrPicker(balancer.ErrNoSubConnAvailable)
	}
	p := &affinePicker{byAddr: make(map[string]balancer.SubConn, len(info.ReadySCs))}
	for sc, sci := range info.ReadySCs {
		p.addrs = append(p.addrs, sci.Address.Addr)
		p.byAddr[sci.Address.Addr] = sc
	}
	return p
}

// affinePicker is round robin over the ready addresses, but a context's
// Affinity keeps its address (and learns it from its first pick).
type affinePicker struct {
	addrs  []string
	byAddr map[string]balancer.SubConn
	next   atomic.Uint32
}

func (p *affinePicker) Pick(info balancer.PickInfo) (balancer.PickResult, error) {
	a := AffinityFrom(info.Ctx)
	addr := a.Addr()
	if sc, ok := p.byAddr[addr]; ok && addr != "" {
		return balancer.PickResult{SubConn: sc}, nil
	}
	next := p.addrs[int(p.next.Add(1)-1)%len(p.addrs)]
	if a != nil && addr == "" {
		// Its first call. An address this connection does not have (gone,
		// or another connection's) is kept, never replaced.
		a.Set(next)
	}
	return balancer.PickResult{SubConn: p.byAddr[next]}, nil
}
