package forward_test

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sharedos/toolshare/bridge-svc/internal/forward"
	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/outcome"
)

// recordingKernel keeps what the kernel's record store does (Begin and
// BeginNew, checked on both stores by recordstest): a call id is recorded
// by the first InvokeTool that reaches the handler, call or abandonment,
// and by nothing after it.
type recordingKernel struct {
	sharedosv1.UnimplementedRuntimeServiceServer
	mu       sync.Mutex
	recorded map[string]bool // call id → recorded by its abandonment
	arrived  int             // calls (not abandonments) that reached the handler
	late     int             // calls that arrived after their abandonment
}

func (k *recordingKernel) InvokeTool(ctx context.Context, call *sharedosv1.ToolCall) (*sharedosv1.ToolResult, error) {
	k.mu.Lock()
	if !call.GetAbandoned() {
		k.arrived++
	}
	if first, ok := k.recorded[call.GetCallId()]; !ok {
		k.recorded[call.GetCallId()] = call.GetAbandoned()
	} else if first && !call.GetAbandoned() {
		k.late++
	}
	k.mu.Unlock()
	if call.GetAbandoned() {
		return outcome.CancelledResult("recorded"), nil
	}
	return &sharedosv1.ToolResult{Status: sharedosv1.OperationStatus_OPERATION_STATUS_SUCCEEDED, ContentJson: []byte(`[]`)}, nil
}

// TestEveryCancelledCallRecordedOverGRPC: calls whose client leaves at any
// moment while they are on their way — before the RPC, while it is sent,
// while the kernel reads it — each reach the kernel's record at least once,
// over a real gRPC connection: where the cancelled RPC never reached the
// kernel's handler (grpc-go runs a unary handler only once its request
// arrived before the cancellation), the abandonment did. That no call id
// is recorded twice — a call arriving after its abandonment, an
// abandonment after its call — is the stores' (recordstest
// BeginNewWritesOnlyTheFirst) and the kernel's (pipeline TestAbandonedCall).
func TestEveryCancelledCallRecordedOverGRPC(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	k := &recordingKernel{recorded: map[string]bool{}}
	srv := grpc.NewServer()
	sharedosv1.RegisterRuntimeServiceServer(srv, k)
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	f := &forward.Forwarder{Invoker: sharedosv1.NewRuntimeServiceClient(conn)}

	// A warm connection, so the cancellations land on calls under way.
	if res, rerr := f.Call(context.Background(), turn(false), forward.Request{Name: "files.read", Arguments: json.RawMessage(`{}`)}); res == nil {
		t.Fatalf("warm-up call not answered: %v", rerr)
	}
	const calls = 600
	delays := make(chan time.Duration)
	go func() {
		defer close(delays)
		rng := rand.New(rand.NewPCG(7, 11))
		for range calls {
			// Cancelled after 0 to 300 µs of a call that takes about that
			// long here; every fourth before the forwarder even starts.
			delays <- time.Duration(rng.IntN(300)) * time.Microsecond
		}
	}()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			i := 0
			for after := range delays {
				ctx, cancel := context.WithCancel(context.Background())
				if (i+w)%4 == 0 {
					cancel()
				} else {
					time.AfterFunc(after, cancel)
				}
				i++
				f.Call(ctx, turn(false), forward.Request{Name: "files.read", Arguments: json.RawMessage(`{"path":"/public/a"}`)})
				cancel()
			}
		})
	}
	wg.Wait()
	srv.GracefulStop() // every handler that was started has ended
	<-served

	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.recorded) != calls+1 {
		t.Fatalf("%d of %d call ids recorded", len(k.recorded), calls+1)
	}
	byAbandonment := 0
	for _, abandoned := range k.recorded {
		if abandoned {
			byAbandonment++
		}
	}
	t.Logf("%d calls reached the handler, %d of them after their abandonment was recorded; %d call ids recorded by their abandonment",
		k.arrived, k.late, byAbandonment)
}
