package callers_test

import (
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/callers"
)

// The table names exactly the methods the contracts define: a new RPC is
// decided here, and no entry names a method that does not exist.
func TestTableCoversEveryMethod(t *testing.T) {
	_ = sharedosv1.File_sharedos_v1_runtime_proto // link the descriptors
	defined := map[string]bool{}
	protoregistry.GlobalFiles.RangeFilesByPackage("sharedos.v1", func(f protoreflect.FileDescriptor) bool {
		for i := range f.Services().Len() {
			s := f.Services().Get(i)
			for j := range s.Methods().Len() {
				defined["/"+string(s.FullName())+"/"+string(s.Methods().Get(j).Name())] = true
			}
		}
		return true
	})
	if len(defined) < 15 {
		t.Fatalf("only %d methods found in sharedos.v1: descriptors not linked?", len(defined))
	}
	for m := range defined {
		if len(callers.Allowed(m)) == 0 {
			t.Errorf("%s has no entry: decide who may call it", m)
		}
	}
	for _, m := range callers.Methods() {
		if !defined[m] {
			t.Errorf("the table names %s, which no contract defines", m)
		}
		for _, r := range callers.Allowed(m) {
			if !callers.Known(r) {
				t.Errorf("%s allows unknown role %q", m, r)
			}
		}
	}
}

func TestMay(t *testing.T) {
	cases := []struct {
		role   callers.Role
		method string
		want   bool
	}{
		{callers.Bridge, "/sharedos.v1.RuntimeService/InvokeTool", true},
		{callers.Operator, "/sharedos.v1.RuntimeService/InvokeTool", false},
		{callers.Host, "/sharedos.v1.BridgeService/OpenTurn", true},
		{callers.Bridge, "/sharedos.v1.BridgeService/OpenTurn", false},
		{callers.Catalog, "/sharedos.v1.ToolHandlerService/Handle", true},
		{callers.Operator, "/sharedos.v1.ToolHandlerService/Handle", false},
		{callers.Operator, "/sharedos.v1.AuthzService/Authorize", false},
		{callers.Operator, "/sharedos.v1.Unknown/Method", false},
	}
	for _, c := range cases {
		if got := callers.May(c.role, c.method); got != c.want {
			t.Errorf("May(%s, %s) = %v, want %v", c.role, c.method, got, c.want)
		}
	}
	if !callers.Open("/grpc.health.v1.Health/Check") || callers.Open("/sharedos.v1.RuntimeService/InvokeTool") {
		t.Error("health must be open and nothing else")
	}
}
