package secretref

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Scope is which references a party that names its own (an operator
// adding an upstream's credential) may resolve in this process. A process
// holds more secrets than those it resolves for others — its database
// URL, its TLS key, its grant key — and a reference to one of them would
// send it where the party says. The zero Scope allows every environment
// variable but the protected ones and no file; ParseScope narrows or
// widens that.
type Scope struct {
	set      bool     // from ParseScope: only what is listed
	names    []string // env:NAME
	prefixes []string // env:PREFIX*
	dirs     []string // file:/dir/ (cleaned, with its trailing separator)
}

// protected are the prefixes of environment variables no scope allows:
// SharedOS's own configuration, OpenTelemetry's exporter (its headers
// carry an API key), libpq's (PGPASSWORD) and the platform's.
var protected = []string{"SHAREDOS_", "OTEL_", "PG", "KUBERNETES_", "K8S_"}

// ProtectedPrefixes are the prefixes of environment variables no scope
// allows (the chart's schema refuses credentials named so; a test holds
// the two to one list).
func ProtectedPrefixes() []string { return slices.Clone(protected) }

// protectedPrefix is the protected prefix name begins with, or "".
func protectedPrefix(name string) string {
	for _, p := range protected {
		if strings.HasPrefix(name, p) {
			return p
		}
	}
	return ""
}

// Dirs are the directories the scope's file: entries allow (each with its
// trailing separator).
func (s Scope) Dirs() []string { return slices.Clone(s.dirs) }

// None is the ParseScope entry that allows no reference at all.
const None = "none"

// ParseScope reads entries: env:NAME, env:PREFIX* (env:* is every
// variable but the protected ones), file:/dir/ (every file under the
// directory, which must end in /), or only None. No entries is the zero
// Scope.
func ParseScope(entries []string) (Scope, error) {
	s := Scope{set: len(entries) > 0}
	for _, e := range entries {
		switch {
		case e == None && len(entries) == 1:
		case strings.HasPrefix(e, refEnv) && len(e) > len(refEnv):
			name := e[len(refEnv):]
			if p := protectedPrefix(name); p != "" {
				return Scope{}, fmt.Errorf("%q: %s* is never resolved for others (the process's own configuration or the platform's)", e, p)
			}
			if p, ok := strings.CutSuffix(name, "*"); ok {
				s.prefixes = append(s.prefixes, p)
			} else if Check(name) == nil {
				s.names = append(s.names, name)
			} else {
				return Scope{}, fmt.Errorf("%q: not an environment variable name", e)
			}
		case strings.HasPrefix(e, refFile+"/") && strings.HasSuffix(e, "/"):
			dir := filepath.Clean(e[len(refFile):])
			if sys := systemDir(dir); sys != "" {
				return Scope{}, fmt.Errorf("%q: holds or lies in %s, whose files are the process's own state (its environment in /proc/self/environ) or devices, never a credential", e, sys)
			}
			s.dirs = append(s.dirs, strings.TrimSuffix(dir, string(filepath.Separator))+string(filepath.Separator))
		default:
			return Scope{}, fmt.Errorf("%q: want env:NAME, env:PREFIX*, file:/directory/ or only %s", e, None)
		}
	}
	return s, nil
}

// systemDirs are the kernel's pseudo-filesystems: no scope's directory may
// hold or lie in one.
var systemDirs = []string{"/proc", "/sys", "/dev"}

// systemDir is the system directory that the cleaned directory dir holds
// or lies in, or "".
func systemDir(dir string) string {
	for _, sys := range systemDirs {
		if Overlap(dir, sys) {
			return sys
		}
	}
	return ""
}

// Overlap reports whether the cleaned absolute paths a and b are one
// directory or one lies in the other.
func Overlap(a, b string) bool {
	within := func(p, dir string) bool {
		return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, string(filepath.Separator))+string(filepath.Separator))
	}
	return within(a, b) || within(b, a)
}

// ErrOutOfScope: a well-formed reference the scope does not allow.
var ErrOutOfScope = errors.New("not a reference this process resolves for others")

// Allows reports whether ref is well formed and in s.
func (s Scope) Allows(ref string) error {
	if err := Check(ref); err != nil {
		return err
	}
	if path, ok := strings.CutPrefix(ref, refFile); ok {
		if _, _, ok := s.under(path); !ok {
			return fmt.Errorf("%s: %w (a file only under a file:/directory/ of the scope)", ref, ErrOutOfScope)
		}
		return nil
	}
	name := strings.TrimPrefix(ref, refEnv)
	if p := protectedPrefix(name); p != "" {
		return fmt.Errorf("%s: %w (never %s*: the process's own configuration or the platform's)", ref, ErrOutOfScope, p)
	}
	if !s.set || slices.Contains(s.names, name) || slices.ContainsFunc(s.prefixes, func(p string) bool { return strings.HasPrefix(name, p) }) {
		return nil
	}
	return fmt.Errorf("%s: %w (not among the names the scope lists)", ref, ErrOutOfScope)
}

// under is the directory of s that path is in, and path relative to it.
func (s Scope) under(path string) (dir, rel string, ok bool) {
	clean := filepath.Clean(path)
	for _, d := range s.dirs {
		if r, ok := strings.CutPrefix(clean, d); ok && r != "" {
			return d, r, true
		}
	}
	return "", "", false
}

// Resolve is Resolve for a reference s allows. A file is read inside its
// directory (os.Root): a symbolic link out of it is not followed.
func (s Scope) Resolve(ref string) (string, error) {
	if err := s.Allows(ref); err != nil {
		return "", err
	}
	path, ok := strings.CutPrefix(ref, refFile)
	if !ok {
		return Resolve(ref)
	}
	dir, rel, _ := s.under(path)
	root, err := os.OpenRoot(dir)
	if err != nil {
		return "", fmt.Errorf("secret %s: %w", ref, err)
	}
	defer func() { _ = root.Close() }()
	b, err := readFile(root.FS(), filepath.ToSlash(rel))
	if err != nil {
		return "", fmt.Errorf("secret %s: %w", ref, err)
	}
	if v := strings.TrimRight(string(b), "\r\n"); v != "" {
		return v, nil
	}
	return "", fmt.Errorf("secret %s: %w", ref, ErrEmpty)
}
