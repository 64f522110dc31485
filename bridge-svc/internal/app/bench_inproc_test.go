package app_test

import (
	"context"
	"testing"

	"google.golang.org/grpc"

	"github.com/sharedos/toolshare/bridge-svc/internal/app"
	"github.com/sharedos/toolshare/bridge-svc/internal/bridgetest"
	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/systemtest/launch"
)

// inProcInvoker calls the fake kernel without gRPC: the bridge's own cost.
type inProcInvoker struct{ k *bridgetest.FakeKernel }

func (i inProcInvoker) InvokeTool(ctx context.Context, in *sharedosv1.ToolCall, _ ...grpc.CallOption) (*sharedosv1.ToolResult, error) {
	return i.k.InvokeTool(ctx, in)
}

// BenchmarkToolCallInProcessKernel isolates the bridge: the same path as
// BenchmarkToolCall with the kernel hop replaced by a function call.
func BenchmarkToolCallInProcessKernel(b *testing.B) {
	catalog, kernel := &bridgetest.FakeCatalog{}, bridgetest.NewFakeKernel()
	catalog.SetTools(bridgetest.DefaultTools())
	addr := bridgetest.ServeFakes(b, catalog, kernel)
	br := bridgetest.Start(b, addr, "", func(c *app.Config) { c.Invoker = inProcInvoker{kernel} })
	lease := br.Open(b)
	for _, e := range benchEras {
		b.Run(e.name+"/c=1", func(b *testing.B) {
			runCalls(b, &launch.MCPTarget{URL: lease.GetMcpUrl(), Token: lease.GetToken(), Modern: e.modern}, "notes.append", false)
		})
	}
}
