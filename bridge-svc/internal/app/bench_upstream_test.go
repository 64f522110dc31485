package app_test

import (
	"testing"

	"github.com/sharedos/toolshare/services/systemtest/launch"
)

// BenchmarkUpstreamToolCall is a call to an upstream MCP server's tool
// through the full path — MCP client → bridge-svc → kernel → authz-svc →
// the upstream over Streamable HTTP (ADR 0019) — against the same upstream
// called directly by the same client, in the same run. Beside them, the
// files provider's full path and plain mcp-go: the goal is that the
// upstream path adds no more than the files path adds over plain mcp-go.
// The upstream is plain mcp-go (launch.PlainMCP) acquired as "everything" (the
// example policy's integrator role) with its tool confirmed read-only, so
// calls of one turn run in parallel as files.read's do.
func BenchmarkUpstreamToolCall(b *testing.B) {
	up := launch.PlainMCP(b)
	st := launch.Start(b, launch.Options{})
	mcpURL, token := st.UpstreamTurn(b, up)
	const fileArgs = `{"path":"/public/a.txt"}`
	eachPoint(func(e benchEra, c concurrency) {
		b.Run("upstream-direct/"+e.name+"/"+c.name, func(b *testing.B) {
			runCalls(b, &launch.MCPTarget{URL: up, Modern: e.modern}, "notes.append", c.parallel)
		})
		b.Run("upstream-path/"+e.name+"/"+c.name, func(b *testing.B) {
			cpu := launch.NewCPUMeter(st.Demo.PIDs)
			runCalls(b, &launch.MCPTarget{URL: mcpURL, Token: token, Modern: e.modern}, "everything.notes.append", c.parallel)
			cpu.Report(b, b.N)
		})
		b.Run("plain/"+e.name+"/"+c.name, func(b *testing.B) {
			runCalls(b, &launch.MCPTarget{URL: up, Modern: e.modern, Args: fileArgs}, "files.read", c.parallel)
		})
		b.Run("files-path/"+e.name+"/"+c.name, func(b *testing.B) {
			cpu := launch.NewCPUMeter(st.Demo.PIDs)
			runCalls(b, &launch.MCPTarget{URL: st.Demo.MCPURL, Token: st.Demo.Token, Modern: e.modern, Args: fileArgs}, "files.read", c.parallel)
			cpu.Report(b, b.N)
		})
	})
}
