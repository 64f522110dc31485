// Package secretref resolves secret references: a configuration names where
// a secret is, never the secret. catalog-svc reads an upstream MCP server's
// credentials through it (ADR 0019), within a Scope (an operator names them,
// and the process holds secrets of its own), sharedosctl a live column's
// model credential.
package secretref

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Secret references name where a value is, never the value: "env:NAME" (an
// environment variable of the process; a bare NAME means the same) or
// "file:/abs/path" (a mounted Kubernetes Secret, say). Trailing newlines of
// a file are dropped.
const (
	refEnv  = "env:"
	refFile = "file:"
)

// Check reports whether ref is a well-formed secret reference.
func Check(ref string) error {
	switch {
	case strings.HasPrefix(ref, refEnv) && len(ref) > len(refEnv):
		return nil
	case strings.HasPrefix(ref, refFile) && strings.HasPrefix(ref[len(refFile):], "/"):
		return nil
	case ref != "" && !strings.ContainsAny(ref, ":=/ \t"):
		return nil // a bare environment variable name
	}
	return fmt.Errorf("%q is not a secret reference: want NAME, env:NAME or file:/absolute/path", ref)
}

// MaxFileBytes bounds a secret read from a file: a credential is a few KiB;
// a device or a large file named by mistake (or by an operator probing) is
// refused, not read into memory.
const MaxFileBytes = 1 << 20

// readFile reads the regular file name of fsys, at most MaxFileBytes. A
// FIFO, device or directory is refused before it is opened: opening a FIFO
// would wait for a writer, reading a device would not end.
func readFile(fsys fs.FS, name string) ([]byte, error) {
	st, err := fs.Stat(fsys, name)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%s)", st.Mode().Type())
	}
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	b, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxFileBytes {
		return nil, fmt.Errorf("larger than %d bytes", MaxFileBytes)
	}
	return b, nil
}

// ErrEmpty: a reference resolved to nothing.
var ErrEmpty = errors.New("the secret is empty")

// Resolve reads the value ref names; an empty value is an error.
func Resolve(ref string) (string, error) {
	if err := Check(ref); err != nil {
		return "", err
	}
	var v string
	if name, ok := strings.CutPrefix(ref, refFile); ok {
		name = filepath.Clean(name)
		b, err := readFile(os.DirFS(filepath.Dir(name)), filepath.Base(name))
		if err != nil {
			return "", fmt.Errorf("secret %s: %w", ref, err)
		}
		v = strings.TrimRight(string(b), "\r\n")
	} else {
		v = os.Getenv(strings.TrimPrefix(ref, refEnv))
	}
	if v == "" {
		return "", fmt.Errorf("secret %s: %w", ref, ErrEmpty)
	}
	return v, nil
}
