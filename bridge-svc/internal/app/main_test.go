package app_test

import (
	"fmt"
	"net/http"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/sharedos/toolshare/services/platform/pgdb/pgtest"
	"github.com/sharedos/toolshare/services/systemtest/launch"
)

// TestMain drops the pgtest templates, and fails the package when anything
// the tests started is still running afterwards: bridges, turn servers
// (none may outlive eviction), fakes, clients.
func TestMain(m *testing.M) {
	code := m.Run()
	if err := pgtest.DropTemplates(); err != nil {
		fmt.Fprintln(os.Stderr, "pgtest:", err)
		if code == 0 {
			code = 1
		}
	}
	http.DefaultClient.CloseIdleConnections()
	launch.MCPClient.CloseIdleConnections()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines leaked:", err)
			code = 1
		}
	}
	os.Exit(code)
}
