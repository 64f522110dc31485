package app_test

import (
	"testing"
	"time"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/callers"

	"github.com/sharedos/toolshare/services/systemtest/launch"
)

// BenchmarkUpstreamToolCall is a call to an upstream MCP server's tool
// through the full path — MCP client → bridge-svc → kernel → authz-svc →
// the upstream over Streamable HTTP (ADR 0019) — against the same upstream
// called directly by the same client, in the same run. Beside them, the
// files provider's full path, plain mcp-go and the files provider called
// directly over gRPC: the goal is that the upstream path adds no more than
// the files path adds (over plain mcp-go, and over its provider called
// directly).
// The upstream is plain mcp-go (launch.PlainMCP) acquired as "everything" (the
// example policy's integrator role) with its tool confirmed read-only, so
// calls of one turn run in parallel as files.read's do. Every sub-benchmark
// reports the CPU per call of each process (all-cpu-µs/call; an idle one
// adds nothing): what a path adds can be read in CPU too, steadier between
// runs than the wall time on a shared machine.
func BenchmarkUpstreamToolCall(b *testing.B) {
	up := launch.PlainMCP(b)
	st := launch.Start(b, launch.Options{})
	mcpURL, token := st.UpstreamTurn(b, up)
	kernel := st.Credentials(b, st.Identity(b, "bench-kernel", callers.Catalog, "bench"))
	files := sharedosv1.NewToolHandlerServiceClient(st.DialAs(kernel, st.Addrs["files"]))
	const fileArgs = `{"path":"/public/a.txt"}`
	eachPoint(func(e benchEra, c concurrency) {
		b.Run("upstream-direct/"+e.name+"/"+c.name, func(b *testing.B) {
			cpu := launch.NewCPUMeter(st.Demo.PIDs)
			runCalls(b, &launch.MCPTarget{URL: up, Modern: e.modern}, "notes.append", c.parallel)
			cpu.Report(b, b.N)
		})
		b.Run("upstream-path/"+e.name+"/"+c.name, func(b *testing.B) {
			cpu := launch.NewCPUMeter(st.Demo.PIDs)
			runCalls(b, &launch.MCPTarget{URL: mcpURL, Token: token, Modern: e.modern}, "everything.notes.append", c.parallel)
			cpu.Report(b, b.N)
		})
		b.Run("plain/"+e.name+"/"+c.name, func(b *testing.B) {
			cpu := launch.NewCPUMeter(st.Demo.PIDs)
			runCalls(b, &launch.MCPTarget{URL: up, Modern: e.modern, Args: fileArgs}, "files.read", c.parallel)
			cpu.Report(b, b.N)
		})
		// The files provider called directly, as the kernel calls it (gRPC,
		// mutual TLS, the kernel's identity): the files path's own "called
		// directly", beside plain mcp-go.
		b.Run("files-direct/"+e.name+"/"+c.name, func(b *testing.B) {
			req := &sharedosv1.HandleRequest{Tool: "files.read", ArgumentsJson: []byte(fileArgs)}
			if _, err := files.Handle(b.Context(), req); err != nil {
				b.Fatal(err)
			}
			var lat latencies
			cpu := launch.NewCPUMeter(st.Demo.PIDs)
			runLoop(b, c.parallel, func() {
				start := time.Now()
				if res, err := files.Handle(b.Context(), req); err != nil || res.GetIsError() {
					b.Errorf("Handle: %v, %v", res, err)
				}
				lat.add(time.Since(start))
			})
			cpu.Report(b, b.N)
			lat.report(b)
		})
		b.Run("files-path/"+e.name+"/"+c.name, func(b *testing.B) {
			cpu := launch.NewCPUMeter(st.Demo.PIDs)
			runCalls(b, &launch.MCPTarget{URL: st.Demo.MCPURL, Token: st.Demo.Token, Modern: e.modern, Args: fileArgs}, "files.read", c.parallel)
			cpu.Report(b, b.N)
		})
	})
}
