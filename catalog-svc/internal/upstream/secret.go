package upstream

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// Secret references name where a value is, never the value: "env:NAME" (an
// environment variable of catalog-svc; a bare NAME means the same) or
// "file:/abs/path" (a mounted Kubernetes Secret, say). Trailing newlines of
// a file are dropped.
const (
	refEnv  = "env:"
	refFile = "file:"
)

// CheckRef reports whether ref is a well-formed secret reference.
func CheckRef(ref string) error {
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

// errEmptySecret: a reference resolved to nothing.
var errEmptySecret = errors.New("the secret is empty")

// resolve reads the value ref names.
func resolve(ref string) (string, error) {
	if err := CheckRef(ref); err != nil {
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
		return "", fmt.Errorf("secret %s: %w", ref, errEmptySecret)
	}
	return v, nil
}
