package migrate

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/sharedos/toolshare/services/platform/config"
)

// Command is a service's `migrate [--check]` subcommand (prog names it in
// messages, e.g. "catalog-svc migrate"): it applies the migrations, or with
// --check only reports whether any is pending, so the Helm init container can
// wait until a pod's schema is at least what its binary expects. Exit codes:
// 0 done or current, 1 failed or pending, 2 usage.
func (s Set) Command(ctx context.Context, prog string, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet(prog, flag.ContinueOnError)
	fs.SetOutput(stderr)
	db := config.String(fs, "database-url", "", "PostgreSQL URL (required)")
	check := fs.Bool("check", false, "do not migrate: exit 0 when the schema is current, 1 when migrations are pending")
	if err := config.Parse(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, prog+":", err)
		return 2
	}
	if *db == "" {
		fmt.Fprintln(stderr, prog+": --database-url (or SHAREDOS_DATABASE_URL) is required")
		return 2
	}
	var err error
	if *check {
		err = s.Check(ctx, *db)
	} else {
		err = s.Up(ctx, *db)
	}
	if err != nil {
		fmt.Fprintln(stderr, prog+":", err)
		return 1
	}
	return 0
}
