// Package grpcx builds the gRPC servers and client connections every SharedOS
// service uses, so that health, reflection, tracing, panic recovery, keepalive,
// deadlines and retry behaviour are identical across catalog-svc, authz-svc,
// bridge-svc and the tool providers.
//
// Server side (NewServer, Serve):
//   - grpc.health.v1 with an overall ("") status and per-service statuses; every
//     status flips to NOT_SERVING the moment shutdown starts, before draining,
//     so Kubernetes readiness and client-side health checks stop routing here;
//   - mutual TLS 1.3 and caller authorization by the callers table when
//     ServerOptions.TLS is set (platform/mtls; ADR 0012);
//   - server reflection only when ServerOptions.Reflection (--reflection);
//   - an otelgrpc stats handler that skips /grpc.health.v1.Health/* (probes
//     would otherwise drown the traces) while a tracer or meter provider is
//     installed, and otherwise only the trace context read from the
//     request's metadata (telemetry.go);
//   - unary and stream recovery interceptors: a panic becomes codes.Internal
//     with the fixed text "internal error" (the panic value never reaches the
//     client) and the stack is logged;
//   - a keepalive enforcement policy (MinTime 10 s, pings without streams
//     allowed) that tolerates the pings Dial's clients send every 20 s; the
//     grpc-go default (5 min, no idle pings) would answer them with GOAWAY
//     "too_many_pings".
//
// Client side (Dial): plaintext transport unless the caller passes its
// mtls.Credentials.DialOption (every service does), an otelgrpc client stats handler (health checks filtered out;
// with no provider installed, only the trace context written into the
// request's metadata), a default deadline
// for unary calls whose context has none (gRPC sets none by default and a
// missing deadline turns a stuck peer into a stuck caller), 64 MiB message
// limits and retries explicitly disabled: a tool invocation must never be
// replayed behind the caller's back once it may have reached a handler. Its
// balancer (BalancerName) is round robin over every resolved address, except
// that the calls of a context with an Affinity stay on one address: the
// rounds of one attempt reach the kernel replica where its upstream call
// waits.
package grpcx
