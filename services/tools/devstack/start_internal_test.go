package devstack

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A service make run starts reads no SHAREDOS_ setting of sharedos-dev's
// environment as its own flag (SHAREDOS_METRICS_LISTEN would have every
// service bind one address); the log level is shared.
func TestServicesStartWithoutSharedOSSettings(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "printenv")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nenv\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SHAREDOS_METRICS_LISTEN", "127.0.0.1:9464")
	t.Setenv("SHAREDOS_LOG_LEVEL", "debug")
	t.Setenv("DEVSTACK_TEST_KEPT", "yes")
	p, err := start(context.Background(), bin, "printenv", nil, dir, false, dir)
	if err != nil {
		t.Fatal(err)
	}
	<-p.done
	p.log.Close()
	b, err := os.ReadFile(filepath.Join(dir, "printenv.log"))
	if err != nil {
		t.Fatal(err)
	}
	env := "\n" + string(b)
	if strings.Contains(env, "\nSHAREDOS_METRICS_LISTEN=") {
		t.Errorf("the service was started with sharedos-dev's SHAREDOS_METRICS_LISTEN:%s", env)
	}
	if !strings.Contains(env, "\nSHAREDOS_LOG_LEVEL=debug\n") || !strings.Contains(env, "\nDEVSTACK_TEST_KEPT=yes\n") {
		t.Errorf("the service lost the log level or the rest of the environment:%s", env)
	}
}
