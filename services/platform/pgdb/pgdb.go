package pgdb

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Pool defaults, applied only where the DSN does not set the value itself
// (pool_max_conns, connect_timeout, ... stay available to operators).
const (
	// DefaultMaxConns suits a 2-core pod; Postgres max_connections (100 by
	// default) must cover pods × services × MaxConns.
	DefaultMaxConns = 10
	// DefaultConnectTimeout keeps a dead or unroutable server from hanging
	// startup and readiness for the OS TCP timeout (minutes).
	DefaultConnectTimeout = 5 * time.Second
	// DefaultHealthCheckPeriod retires broken idle connections (e.g. after a
	// failover) before a request picks them up.
	DefaultHealthCheckPeriod = 30 * time.Second
	// DefaultMaxConnLifetime spreads connections over new replicas/poolers.
	DefaultMaxConnLifetime = 30 * time.Minute
	// DefaultMaxConnIdleTime returns idle connections to the server.
	DefaultMaxConnIdleTime = 5 * time.Minute
	// DefaultStatementTimeout is every statement's server-side bound
	// (statement_timeout): no request waits on a stuck query for longer.
	// The services' statements are single-row reads and writes.
	DefaultStatementTimeout = 15 * time.Second
)

// ErrInvalidDSN reports a DSN that does not parse.
var ErrInvalidDSN = errors.New("invalid PostgreSQL DSN")

// Open parses dsn (URL or keyword=value form), applies the pool defaults,
// connects and pings, so a service fails at startup rather than on its first
// request. The caller closes the pool. Errors name the DSN with its password
// masked and never contain the password.
func Open(ctx context.Context, dsn string, opts ...Option) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("pgdb: %w %s: %s", ErrInvalidDSN, RedactDSN(dsn), scrub(parseReason(err), dsn))
	}
	dsnMax, dsnSetsMax := cfg.MaxConns, hasSetting(dsn, "pool_max_conns")
	if !dsnSetsMax {
		cfg.MaxConns = DefaultMaxConns
	}
	if !hasSetting(dsn, "pool_health_check_period") {
		cfg.HealthCheckPeriod = DefaultHealthCheckPeriod
	}
	if !hasSetting(dsn, "pool_max_conn_lifetime") {
		cfg.MaxConnLifetime = DefaultMaxConnLifetime
	}
	if !hasSetting(dsn, "pool_max_conn_idle_time") {
		cfg.MaxConnIdleTime = DefaultMaxConnIdleTime
	}
	if !hasSetting(dsn, "statement_timeout") {
		cfg.ConnConfig.RuntimeParams["statement_timeout"] = fmt.Sprint(DefaultStatementTimeout.Milliseconds())
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	// Every service's statements become client spans in the request's trace.
	cfg.ConnConfig.Tracer = NewTracer(WithDatabase(cfg.ConnConfig.Database))
	for _, o := range opts {
		o(cfg)
	}
	if dsnSetsMax {
		cfg.MaxConns = dsnMax // the operator's DSN is the last word
	}

	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, &redactedError{msg: scrub(fmt.Sprintf("pgdb: open %s: %v", RedactDSN(dsn), err), dsn), err: err}
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, &redactedError{msg: scrub(fmt.Sprintf("pgdb: connect %s: %v", RedactDSN(dsn), err), dsn), err: err}
	}
	return pool, nil
}

// redactedError keeps the cause reachable for errors.Is/As (context
// deadlines, *pgconn.ConnectError) while its text is scrubbed.
// Option tunes Open.
type Option func(*pgxpool.Config)

// WithMaxConns bounds the pool at n connections (n > 0); a pool_max_conns
// in the DSN still wins (Open).
func WithMaxConns(n int) Option {
	return func(c *pgxpool.Config) {
		if n > 0 {
			c.MaxConns = int32(min(n, 1<<20))
		}
	}
}

// WithRole makes every connection of the pool act as role from its start
// (the "role" setting of the startup packet, i.e. SET ROLE): a service runs
// with its least-privilege role even when its login user owns the schema
// (ADR 0013). The login user must be a member of role; empty is no change.
func WithRole(role string) Option {
	return func(c *pgxpool.Config) {
		if role != "" {
			c.ConnConfig.RuntimeParams["role"] = role
		}
	}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// parseReason drops the echo of the connection string from a pgx parse error
// ("cannot parse `<dsn>`: reason"); pgx's own redaction is best effort.
func parseReason(err error) string {
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, "cannot parse `"); ok {
		if i := strings.LastIndex(rest, "`: "); i >= 0 {
			return rest[i+3:]
		}
	}
	return msg
}

// hasSetting reports whether dsn sets key, in either DSN form.
func hasSetting(dsn, key string) bool {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		return u.Query().Has(key)
	}
	return regexp.MustCompile(`(^|\s)` + regexp.QuoteMeta(key) + `\s*=`).MatchString(dsn)
}

const mask = "xxxxx"

var (
	kvPasswordQuoted = regexp.MustCompile(`((?:^|\s)(?:ssl)?password\s*=\s*)'(?:[^'\\]|\\.)*'`)
	kvPasswordPlain  = regexp.MustCompile(`((?:^|\s)(?:ssl)?password\s*=\s*)[^\s']\S*`)
	urlUserinfo      = regexp.MustCompile(`^([a-zA-Z][a-zA-Z0-9+.-]*://[^:/@]*):[^@/]*@`)
)

// RedactDSN returns dsn with every password (URL userinfo, password= and
// sslpassword= settings) replaced by "xxxxx", for logs and error messages.
func RedactDSN(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.Scheme != "" && u.Host != "" {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), mask)
		}
		q := u.Query()
		changed := false
		for _, k := range []string{"password", "sslpassword"} {
			if q.Has(k) {
				q.Set(k, mask)
				changed = true
			}
		}
		if changed {
			u.RawQuery = q.Encode()
		}
		return u.String()
	}
	// Keyword/value form, or a URL too broken to parse.
	s := kvPasswordQuoted.ReplaceAllString(dsn, "${1}"+mask)
	s = kvPasswordPlain.ReplaceAllString(s, "${1}"+mask)
	return urlUserinfo.ReplaceAllString(s, "${1}:"+mask+"@")
}

// scrub removes any password found in dsn from msg: the last line of defence
// for messages built from driver errors.
func scrub(msg, dsn string) string {
	for _, pw := range passwords(dsn) {
		if len(pw) >= 1 {
			msg = strings.ReplaceAll(msg, pw, mask)
			if esc := url.QueryEscape(pw); esc != pw {
				msg = strings.ReplaceAll(msg, esc, mask)
			}
		}
	}
	return msg
}

// passwords extracts the password values of dsn, best effort, in both forms.
func passwords(dsn string) []string {
	var out []string
	if u, err := url.Parse(dsn); err == nil {
		if pw, has := u.User.Password(); has {
			out = append(out, pw)
		}
		q := u.Query()
		for _, k := range []string{"password", "sslpassword"} {
			if v := q.Get(k); v != "" {
				out = append(out, v)
			}
		}
	}
	if m := urlUserinfo.FindStringSubmatch(dsn); m != nil {
		// The raw userinfo password (a broken URL that url.Parse refused).
		rest := strings.TrimPrefix(dsn, m[1]+":")
		if i := strings.Index(rest, "@"); i > 0 {
			out = append(out, rest[:i])
			if dec, err := url.PathUnescape(rest[:i]); err == nil {
				out = append(out, dec)
			}
		}
	}
	for _, re := range []*regexp.Regexp{
		regexp.MustCompile(`(?:^|\s)(?:ssl)?password\s*=\s*'((?:[^'\\]|\\.)*)'`),
		regexp.MustCompile(`(?:^|\s)(?:ssl)?password\s*=\s*([^\s']\S*)`),
	} {
		for _, m := range re.FindAllStringSubmatch(dsn, -1) {
			out = append(out, m[1], strings.ReplaceAll(m[1], `\'`, `'`))
		}
	}
	return out
}
