package config_test

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sharedos/toolshare/services/platform/config"
)

func TestEnvName(t *testing.T) {
	for in, want := range map[string]string{
		"policy-dir":        "SHAREDOS_POLICY_DIR",
		"grpc.addr":         "SHAREDOS_GRPC_ADDR",
		"database-url":      "SHAREDOS_DATABASE_URL",
		"max_turns":         "SHAREDOS_MAX_TURNS",
		"mcp-http-listen-a": "SHAREDOS_MCP_HTTP_LISTEN_A",
	} {
		if got := config.EnvName(in); got != want {
			t.Errorf("EnvName(%q) = %q, want %q", in, got, want)
		}
	}
}

type settings struct {
	dir     *string
	workers *int
	debug   *bool
	ttl     *time.Duration
	origins *[]string
}

func define(fs *flag.FlagSet) settings {
	return settings{
		dir:     config.String(fs, "policy-dir", "policies", "policy directory"),
		workers: config.Int(fs, "workers", 4, "worker count"),
		debug:   config.Bool(fs, "debug", false, "debug mode"),
		ttl:     config.Duration(fs, "turn-ttl", time.Hour, "turn lifetime"),
		origins: config.StringSlice(fs, "allowed-origins", []string{"http://localhost"}, "allowed Origin values"),
	}
}

func newFlagSet() *flag.FlagSet {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

func TestDefaults(t *testing.T) {
	fs := newFlagSet()
	s := define(fs)
	if err := config.Parse(fs, nil); err != nil {
		t.Fatal(err)
	}
	if *s.dir != "policies" || *s.workers != 4 || *s.debug || *s.ttl != time.Hour || !slices.Equal(*s.origins, []string{"http://localhost"}) {
		t.Fatalf("defaults = %q %d %v %v %v", *s.dir, *s.workers, *s.debug, *s.ttl, *s.origins)
	}
}

func TestEnvOverridesDefaultAndFlagOverridesEnv(t *testing.T) {
	t.Setenv("SHAREDOS_POLICY_DIR", "/etc/policies")
	t.Setenv("SHAREDOS_WORKERS", "8")
	t.Setenv("SHAREDOS_DEBUG", "true")
	t.Setenv("SHAREDOS_TURN_TTL", "90s")
	t.Setenv("SHAREDOS_ALLOWED_ORIGINS", " https://a.example , ,https://b.example")

	fs := newFlagSet()
	s := define(fs)
	if err := config.Parse(fs, nil); err != nil {
		t.Fatal(err)
	}
	if *s.dir != "/etc/policies" || *s.workers != 8 || !*s.debug || *s.ttl != 90*time.Second ||
		!slices.Equal(*s.origins, []string{"https://a.example", "https://b.example"}) {
		t.Fatalf("env values = %q %d %v %v %v", *s.dir, *s.workers, *s.debug, *s.ttl, *s.origins)
	}

	fs = newFlagSet()
	s = define(fs)
	err := config.Parse(fs, []string{
		"--policy-dir=/cli", "--workers", "2", "--debug=false", "--turn-ttl=1m",
		"--allowed-origins=https://c.example", "--allowed-origins", "https://d.example,https://e.example",
	})
	if err != nil {
		t.Fatal(err)
	}
	if *s.dir != "/cli" || *s.workers != 2 || *s.debug || *s.ttl != time.Minute ||
		!slices.Equal(*s.origins, []string{"https://c.example", "https://d.example", "https://e.example"}) {
		t.Fatalf("flag values = %q %d %v %v %v", *s.dir, *s.workers, *s.debug, *s.ttl, *s.origins)
	}
}

func TestBoolFlagWithoutValue(t *testing.T) {
	fs := newFlagSet()
	s := define(fs)
	if err := config.Parse(fs, []string{"--debug"}); err != nil {
		t.Fatal(err)
	}
	if !*s.debug {
		t.Fatal("--debug did not set the bool")
	}
}

// A word left after the flags is refused rather than ending the parse: the
// flag package stops at it, so "--debug false" used to leave the switch on
// and silently drop every flag after the stray "false".
func TestLeftoverArgumentIsRefusedNotDroppingLaterFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--debug", "false", "--workers", "2"},
		{"stray"},
		{"--workers=2", "stray", "--debug"},
	} {
		fs := newFlagSet()
		s := define(fs)
		err := config.Parse(fs, args)
		if err == nil {
			t.Errorf("Parse(%q) accepted a leftover argument: debug=%v workers=%d", args, *s.debug, *s.workers)
			continue
		}
		if want := fmt.Sprintf("unexpected argument %q", fs.Arg(0)); !strings.Contains(err.Error(), want) ||
			!strings.Contains(err.Error(), "--flag=false") {
			t.Errorf("Parse(%q) = %v, want it to name the argument (%s) and say how to write a boolean", args, err, want)
		}
	}
	fs := newFlagSet()
	s := define(fs)
	if err := config.Parse(fs, []string{"--debug=false", "--workers", "2"}); err != nil || *s.debug || *s.workers != 2 {
		t.Errorf("--debug=false --workers 2: debug=%v workers=%d, %v", *s.debug, *s.workers, err)
	}
}

func TestBadEnvNamesTheVariable(t *testing.T) {
	for _, tc := range []struct{ env, value, rule string }{
		{"SHAREDOS_TURN_TTL", "ten minutes", "duration"},
		{"SHAREDOS_WORKERS", "many", "integer"},
		{"SHAREDOS_DEBUG", "yes please", "boolean"},
	} {
		t.Run(tc.env, func(t *testing.T) {
			t.Setenv(tc.env, tc.value)
			fs := newFlagSet()
			define(fs)
			err := config.Parse(fs, nil)
			if err == nil {
				t.Fatalf("%s=%q accepted", tc.env, tc.value)
			}
			msg := err.Error()
			for _, want := range []string{"env " + tc.env, tc.value, tc.rule} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not mention %q", msg, want)
				}
			}
			var errs config.Errors
			if !errors.As(err, &errs) || len(errs) != 1 {
				t.Errorf("error %T is not a one-entry config.Errors", err)
			}
		})
	}
}

// An integer is decimal whichever way it is written, flag or environment: a
// leading zero is no octal prefix ("010" is ten, "08" eight), and the other
// base prefixes and digit separators Go's literals allow are refused.
func TestIntIsDecimal(t *testing.T) {
	for in, want := range map[string]int{"010": 10, "08": 8, " 42 ": 42, "-3": -3, "+7": 7} {
		fs := newFlagSet()
		s := define(fs)
		if err := config.Parse(fs, []string{"--workers", in}); err != nil || *s.workers != want {
			t.Errorf("--workers %q = %d, %v; want %d", in, *s.workers, err, want)
		}
		t.Setenv("SHAREDOS_WORKERS", in)
		fs = newFlagSet()
		s = define(fs)
		if err := config.Parse(fs, nil); err != nil || *s.workers != want {
			t.Errorf("SHAREDOS_WORKERS=%q = %d, %v; want %d", in, *s.workers, err, want)
		}
	}
	for _, in := range []string{"0x10", "0o10", "0b10", "1_000", "1e3", ""} {
		fs := newFlagSet()
		define(fs)
		err := config.Parse(fs, []string{"--workers=" + in})
		if err == nil || !strings.Contains(err.Error(), "decimal integer") {
			t.Errorf("--workers=%q: %v, want it refused as no decimal integer", in, err)
		}
	}
}

func TestBadEnvIgnoredWhenFlagGiven(t *testing.T) {
	t.Setenv("SHAREDOS_TURN_TTL", "forever")
	fs := newFlagSet()
	s := define(fs)
	if err := config.Parse(fs, []string{"--turn-ttl=5m"}); err != nil {
		t.Fatalf("the command line overrides a broken env value, got %v", err)
	}
	if *s.ttl != 5*time.Minute {
		t.Fatalf("ttl = %v", *s.ttl)
	}
}

func TestBadFlagValue(t *testing.T) {
	fs := newFlagSet()
	define(fs)
	err := config.Parse(fs, []string{"--turn-ttl=soon"})
	if err == nil || !strings.Contains(err.Error(), "turn-ttl") || !strings.Contains(err.Error(), "duration") {
		t.Fatalf("bad flag: %v", err)
	}
}

func TestSecretEnvValueNotEchoed(t *testing.T) {
	t.Setenv("SHAREDOS_TOKEN_TTL", "hunter2")
	fs := newFlagSet()
	config.Duration(fs, "token-ttl", time.Minute, "")
	err := config.Parse(fs, nil)
	if err == nil || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "SHAREDOS_TOKEN_TTL") {
		t.Fatalf("err = %v, want it to name the variable but not echo a secret's value", err)
	}
}

func TestErrors(t *testing.T) {
	var errs config.Errors
	if errs.Err() != nil {
		t.Fatal("empty Errors is not nil")
	}
	errs.Add("policy-dir", "must be set")
	if got := errs.Err().Error(); got != "invalid configuration: flag --policy-dir: must be set" {
		t.Fatalf("one error: %q", got)
	}
	errs.Addf("workers", "must be between 1 and %d, got %d", 64, 0)
	got := errs.Err().Error()
	for _, want := range []string{"flag --policy-dir: must be set", "flag --workers: must be between 1 and 64, got 0"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q lacks %q", got, want)
		}
	}
	var fe *config.FieldError
	if !errors.As(errs.Err(), &fe) || fe.Field != "flag --policy-dir" {
		t.Errorf("errors.As FieldError: %v", fe)
	}
}

func TestPrintRedactsSecrets(t *testing.T) {
	t.Setenv("SHAREDOS_DATABASE_URL", "postgres://u:pw@db/x")
	fs := newFlagSet()
	define(fs)
	config.String(fs, "database-url", "", "database")
	config.String(fs, "pg-dsn", "", "dsn")
	config.String(fs, "api-token", "abc", "token")
	config.String(fs, "client-secret", "s3", "secret")
	config.String(fs, "admin-password", "", "empty secret stays visible")
	config.Bool(fs, "allow-cleartext-credentials", false, "a switch named like a secret")
	config.Duration(fs, "token-ttl", time.Minute, "a duration named like a secret")
	fs.String("plain", "std", "a flag defined without this package")
	if err := config.Parse(fs, []string{"--pg-dsn=host=db password=pw"}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := config.Print(&buf, fs); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"admin-password=\n", "allowed-origins=http://localhost\n", "api-token=REDACTED\n",
		"allow-cleartext-credentials=false\n", "token-ttl=1m0s\n",
		"client-secret=REDACTED\n", "database-url=REDACTED\n", "debug=false\n", "pg-dsn=REDACTED\n",
		"plain=std\n", "policy-dir=policies\n", "turn-ttl=1h0m0s\n", "workers=4\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("Print output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "pw") || strings.Contains(out, "abc") {
		t.Errorf("Print leaked a secret:\n%s", out)
	}
}

func TestIsSecret(t *testing.T) {
	for name, want := range map[string]bool{
		"password": true, "DB_PASSWORD": true, "bearer-token": true, "client-secret": true,
		"postgres-dsn": true, "database-url": true, "database_url": true,
		"policy-dir": false, "listen": false, "turn-ttl": false,
	} {
		if got := config.IsSecret(name); got != want {
			t.Errorf("IsSecret(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestReference(t *testing.T) {
	t.Setenv("SHAREDOS_WORKERS", "99") // the reference shows built-in defaults
	fs := newFlagSet()
	define(fs)
	config.String(fs, "database-url", "postgres://app:pw@db:5432/sharedos", "PostgreSQL `DSN` | URL")
	config.String(fs, "api-token", "abc", "token")
	fs.Int("plain", 1, "not bound")
	var buf bytes.Buffer
	if err := config.Reference(&buf, fs); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"| Flag | Environment variable | Default | Description |\n|---|---|---|---|\n",
		"| `--workers` | `SHAREDOS_WORKERS` | `4` | worker count |\n",
		"| `--turn-ttl` | `SHAREDOS_TURN_TTL` | `1h0m0s` | turn lifetime |\n",
		"| `--database-url` | `SHAREDOS_DATABASE_URL` | `postgres://app:REDACTED@db:5432/sharedos` | PostgreSQL `DSN` \\| URL |\n",
		"| `--api-token` | `SHAREDOS_API_TOKEN` | `REDACTED` | token |\n",
		"| `--debug` | `SHAREDOS_DEBUG` | `false` | debug mode |\n",
		"| `--plain` | — | `1` | not bound |\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("Reference lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, ":pw@") || strings.Contains(out, "99") {
		t.Errorf("Reference leaked a secret or an env value:\n%s", out)
	}
}

func TestUsageMentionsEnv(t *testing.T) {
	fs := newFlagSet()
	define(fs)
	if u := fs.Lookup("policy-dir").Usage; !strings.Contains(u, "SHAREDOS_POLICY_DIR") {
		t.Fatalf("usage %q does not name the env var", u)
	}
}

// An alias sets its target's one value, shows in --help (whose zero-value
// probe must not panic) and in the reference without a variable of its own.
func TestAlias(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	list := config.StringSlice(fs, "allowed-origins", nil, "origins")
	config.Alias(fs, "allowed-origin", "allowed-origins")
	if err := fs.Parse([]string{"--allowed-origin", "a", "--allowed-origins", "b,c", "--allowed-origin", "d"}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(*list, []string{"a", "b", "c", "d"}) {
		t.Errorf("list %v", *list)
	}
	var help, ref bytes.Buffer
	fs.SetOutput(&help)
	fs.PrintDefaults()
	if !strings.Contains(help.String(), "-allowed-origin value\n    \tthe same as --allowed-origins") {
		t.Errorf("help:\n%s", help.String())
	}
	if err := config.Reference(&ref, fs); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ref.String(), "| `--allowed-origin` | — | — | the same as --allowed-origins |") ||
		strings.Count(ref.String(), "SHAREDOS_ALLOWED_ORIGINS") != 1 {
		t.Errorf("reference:\n%s", ref.String())
	}
}
