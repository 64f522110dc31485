package grpcx

import (
	"context"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// LivenessService is the grpc.health.v1 service name every SharedOS server
// answers SERVING for as long as its process runs, whatever its
// dependencies do: liveness probes ask for it, readiness asks for "".
const LivenessService = "liveness"

// drainingHealth is the grpc-go health server with one change: once shutdown
// has begun, a Watch stream ends (with OK) right after it has delivered a
// non-SERVING status. Without that, every open Watch (client-side health
// checking keeps one per connection) is an in-flight RPC that GracefulStop
// waits for, so each drain would last the full drain timeout.
type drainingHealth struct {
	*health.Server
	stopping chan struct{}
	once     sync.Once
}

var _ healthpb.HealthServer = (*drainingHealth)(nil)

func newDrainingHealth() *drainingHealth {
	return &drainingHealth{Server: health.NewServer(), stopping: make(chan struct{})}
}

// shutdown marks every service NOT_SERVING for good (later SetServingStatus
// calls are ignored) and lets Watch streams end.
func (h *drainingHealth) shutdown() {
	h.once.Do(func() {
		close(h.stopping)
		h.Shutdown()
	})
}

// Watch implements healthpb.HealthServer.
func (h *drainingHealth) Watch(req *healthpb.HealthCheckRequest, ss healthpb.Health_WatchServer) error {
	ctx, cancel := context.WithCancel(ss.Context())
	defer cancel()
	w := &endingWatch{Health_WatchServer: ss, ctx: ctx, cancel: cancel, stopping: h.stopping}
	err := h.Server.Watch(req, w)
	if w.ended.Load() {
		return nil
	}
	return err
}

type endingWatch struct {
	healthpb.Health_WatchServer
	ctx      context.Context
	cancel   context.CancelFunc
	stopping <-chan struct{}
	ended    atomic.Bool
}

func (w *endingWatch) Context() context.Context { return w.ctx }

func (w *endingWatch) Send(r *healthpb.HealthCheckResponse) error {
	if err := w.Health_WatchServer.Send(r); err != nil {
		return err
	}
	select {
	case <-w.stopping:
		if r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			w.ended.Store(true)
			w.cancel()
		}
	default:
	}
	return nil
}
