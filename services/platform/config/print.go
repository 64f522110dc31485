package config

import (
	"flag"
	"fmt"
	"io"
	"net/url"
	"strings"
)

// Redacted replaces secret values in Print and Reference.
const Redacted = "REDACTED"

// secretMarkers are substrings of flag names whose values must never be
// printed: credentials, and DSNs/URLs that may embed a password.
var secretMarkers = []string{"password", "token", "secret", "dsn", "database-url", "database_url", "api-key", "api_key", "credential"}

// IsSecret reports whether flag name holds a secret.
func IsSecret(name string) bool {
	n := strings.ToLower(name)
	for _, m := range secretMarkers {
		if strings.Contains(n, m) {
			return true
		}
	}
	return false
}

// secretFlag reports whether f's value is shown redacted: a flag named
// like a secret (IsSecret) that holds text — a flag not defined through
// this package counts as text. A switch, a number or a duration named so
// (--upstream-allow-cleartext-credentials, --token-ttl) is shown: it holds
// no secret, and an operator must see it.
func secretFlag(f *flag.Flag) bool {
	if !IsSecret(f.Name) {
		return false
	}
	b, ok := f.Value.(bound)
	return !ok || b.text()
}

func redactIf(name, v string) string {
	if v != "" && IsSecret(name) {
		return Redacted
	}
	return v
}

// Print writes every flag of fs as name=value, one per line in name order,
// with the values of secret flags (see IsSecret) replaced by REDACTED unless
// empty (an empty secret is worth seeing: it is usually the bug).
func Print(w io.Writer, fs *flag.FlagSet) error {
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if err == nil {
			v := f.Value.String()
			if v != "" && secretFlag(f) {
				v = Redacted
			}
			_, err = fmt.Fprintf(w, "%s=%s\n", f.Name, v)
		}
	})
	return err
}

// Reference writes a markdown table of fs's flags (flag, environment
// variable, built-in default, description) for the configuration section of
// a README. Flags not defined through this package have no environment
// variable. Secret defaults are shown only with any URL password removed.
func Reference(w io.Writer, fs *flag.FlagSet) error {
	var b strings.Builder
	b.WriteString("| Flag | Environment variable | Default | Description |\n")
	b.WriteString("|---|---|---|---|\n")
	fs.VisitAll(func(f *flag.Flag) {
		env, def, usage := "—", f.DefValue, f.Usage
		if bv, ok := f.Value.(bound); ok {
			var e string
			e, def, usage, _ = bv.envInfo()
			env = "`" + e + "`"
		}
		if secretFlag(f) {
			def = redactDefault(def)
		}
		if def == "" {
			def = "—"
		} else {
			def = "`" + def + "`"
		}
		fmt.Fprintf(&b, "| `--%s` | %s | %s | %s |\n", f.Name, env, cell(def), cell(usage))
	})
	_, err := io.WriteString(w, b.String())
	return err
}

// redactDefault keeps a DSN default readable (it documents host and database)
// while dropping a password; any other non-empty secret default is hidden.
func redactDefault(def string) string {
	if def == "" {
		return ""
	}
	u, err := url.Parse(def)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return Redacted
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), Redacted)
	}
	return u.String()
}

// cell makes s safe inside a markdown table cell.
func cell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}
