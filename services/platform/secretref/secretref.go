// Package secretref resolves secret references: a configuration names where
// a secret is, never the secret. catalog-svc reads an upstream MCP server's
// credentials through it (ADR 0019), within a Scope (an operator names them,
// and the process holds secrets of its own), sharedosctl a live column's
// model credential.
package secretref

import (
	"errors"
	"fmt"
	"os"
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

// ErrEmpty: a reference resolved to nothing.
var ErrEmpty = errors.New("the secret is empty")

// Resolve reads the value ref names; an empty value is an error.
func Resolve(ref string) (string, error) {
	if err := Check(ref); err != nil {
		return "", err
	}
	var v string
	if name, ok := strings.CutPrefix(ref, refFile); ok {
		b, err := os.ReadFile(name)
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
