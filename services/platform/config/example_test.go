package config_test

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/sharedos/toolshare/services/platform/config"
)

// A service binds its settings once; SHAREDOS_* variables supply defaults and
// Validate reports every bad setting by flag name.
func Example() {
	fs := flag.NewFlagSet("catalog-svc", flag.ContinueOnError)
	listen := config.String(fs, "listen", "127.0.0.1:7401", "gRPC listen address")
	dsn := config.String(fs, "database-url", "", "PostgreSQL DSN; empty uses the embedded store")
	ttl := config.Duration(fs, "turn-ttl", time.Hour, "turn lease lifetime")

	if err := config.Parse(fs, []string{"--database-url=postgres://app:pw@db/sharedos", "--turn-ttl=0s"}); err != nil {
		fmt.Println(err)
		return
	}
	var errs config.Errors
	if *ttl <= 0 {
		errs.Addf("turn-ttl", "must be positive, got %v", *ttl)
	}
	fmt.Println(errs.Err())
	_ = config.Print(os.Stdout, fs)
	_, _ = listen, dsn
	// Output:
	// invalid configuration: flag --turn-ttl: must be positive, got 0s
	// database-url=REDACTED
	// listen=127.0.0.1:7401
	// turn-ttl=0s
}

func ExampleReference() {
	fs := flag.NewFlagSet("authz-svc", flag.ContinueOnError)
	config.String(fs, "policy-dir", "deploy/policies", "directory of .rego policies")
	config.Duration(fs, "reload-interval", 5*time.Second, "how often to look for policy changes")
	_ = config.Reference(os.Stdout, fs)
	// Output:
	// | Flag | Environment variable | Default | Description |
	// |---|---|---|---|
	// | `--policy-dir` | `SHAREDOS_POLICY_DIR` | `deploy/policies` | directory of .rego policies |
	// | `--reload-interval` | `SHAREDOS_RELOAD_INTERVAL` | `5s` | how often to look for policy changes |
}
