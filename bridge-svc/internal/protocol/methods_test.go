package protocol_test

import (
	"testing"

	"github.com/sharedos/toolshare/bridge-svc/internal/protocol"
)

// TestKnownMethod: the methods of MCP are known byte for byte; any other
// spelling is a client's string.
func TestKnownMethod(t *testing.T) {
	for _, m := range []string{"initialize", "tools/call", "tools/list", "server/discover", "notifications/initialized", "notifications/tools/list_changed"} {
		if !protocol.KnownMethod(m) {
			t.Errorf("KnownMethod(%q) = false", m)
		}
	}
	for _, m := range []string{"", "Tools/Call", "tools/call ", "tools/call\n", "tools/delete", "notifications/"} {
		if protocol.KnownMethod(m) {
			t.Errorf("KnownMethod(%q) = true", m)
		}
	}
}
