package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/callers"
	"github.com/sharedos/toolshare/services/platform/mtls"
	"github.com/sharedos/toolshare/services/systemtest/launch"
)

// TestInternalPlaneRefusesWrongCallers calls every method of every service
// of the running stack with every role the callers table does not allow:
// each is PermissionDenied naming the caller and the method, and nothing
// runs — the refused InvokeTool, sent for the demo turn, leaves no record.
// A plaintext client is refused by every service at the handshake.
func TestInternalPlaneRefusesWrongCallers(t *testing.T) {
	s := startStack(t, launch.Options{})
	server := map[string]string{
		"sharedos.v1.RuntimeService": s.Addrs["catalog"], "sharedos.v1.CatalogService": s.Addrs["catalog"],
		"sharedos.v1.BridgeService": s.Addrs["bridge"], "sharedos.v1.AuthzService": s.Addrs["authz"],
		"sharedos.v1.ToolHandlerService": s.Addrs["files"], "sharedos.v1.UpstreamService": s.Addrs["catalog"],
	}
	creds := map[callers.Role]*mtls.Credentials{}
	dial := map[string]*grpc.ClientConn{}
	conn := func(r callers.Role, addr string) *grpc.ClientConn {
		k := string(r) + "|" + addr
		if c, ok := dial[k]; ok {
			return c
		}
		if creds[r] == nil {
			creds[r] = s.Credentials(t, s.Identity(t, "wrong-"+string(r), r, "intruder"))
		}
		c := s.DialAs(creds[r], addr)
		dial[k] = c
		return c
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tried := 0
	for _, m := range callers.Methods() {
		svc := strings.Split(strings.TrimPrefix(m, "/"), "/")[0]
		addr := server[svc]
		if addr == "" {
			t.Fatalf("no server of the stack serves %s", m)
		}
		var req proto.Message = &emptypb.Empty{}
		if m == "/sharedos.v1.RuntimeService/InvokeTool" {
			req = &sharedosv1.ToolCall{CallId: "intruder", TurnId: s.Demo.TurnID, Tool: "files.read",
				ArgumentsJson: []byte(`{"path":"/private/secret.txt"}`)}
		}
		for _, r := range callers.Roles {
			if callers.May(r, m) {
				continue
			}
			tried++
			err := conn(r, addr).Invoke(ctx, m, req, &emptypb.Empty{})
			if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "/"+string(r)+"/intruder") ||
				!strings.Contains(err.Error(), m) {
				t.Errorf("%s as %s: %v, want PermissionDenied naming the caller and the method", m, r, err)
			}
		}
	}
	if tried < 40 {
		t.Fatalf("only %d wrong (method, role) pairs tried", tried)
	}
	var ops []struct{ CallID string }
	s.ctlJSON(t, &ops, "ops", "list", "--turn", s.Demo.TurnID)
	if len(ops) != 0 {
		t.Errorf("refused calls left %d records on the demo turn: %+v", len(ops), ops)
	}

	for name, addr := range map[string]string{"catalog": s.Addrs["catalog"], "authz": s.Addrs["authz"],
		"bridge": s.Addrs["bridge"], "files": s.Addrs["files"]} {
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		err = cc.Invoke(ctx, "/grpc.health.v1.Health/Check", &emptypb.Empty{}, &emptypb.Empty{})
		cc.Close()
		if status.Code(err) != codes.Unavailable {
			t.Errorf("%s answered a plaintext client: %v", name, err)
		}
	}
}
