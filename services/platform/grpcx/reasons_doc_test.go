package grpcx_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// root is the repository, relative to this package.
var root = filepath.Join("..", "..", "..")

// TestReasonsAreDocumented fails when an ErrorInfo domain or reason a
// service returns is missing from docs/errors.md: clients switch on them,
// so the reference cannot drift from the code. It reads every service's
// source for the constants ErrorDomain* and Reason*, and for the literals
// of the kernel's coded errors (&Error{codes.X, "REASON", …}). Such a
// constant may name another package's (outcome.ReasonAuthzEvalError) only if
// that one's name is read here too: it is checked where it is declared.
func TestReasonsAreDocumented(t *testing.T) {
	docPath := filepath.Join(root, "docs", "errors.md")
	doc, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatalf("read %s: %v", docPath, err)
	}
	text := string(doc)
	found := 0
	check := func(fset *token.FileSet, pos token.Pos, what string, lit ast.Expr) {
		if sel, ok := lit.(*ast.SelectorExpr); ok && checked(sel.Sel.Name) {
			return
		}
		bl, ok := lit.(*ast.BasicLit)
		if !ok || bl.Kind != token.STRING {
			t.Errorf("%s: %s is not a string literal; this test reads literals", fset.Position(pos), what)
			return
		}
		v, err := strconv.Unquote(bl.Value)
		if err != nil {
			t.Fatal(err)
		}
		found++
		if !strings.Contains(text, "`"+v+"`") {
			t.Errorf("%s: %s %q is not in %s (write it as `%s`)", fset.Position(pos), what, v, docPath, v)
		}
	}
	for _, svc := range []string{"catalog-svc", "authz-svc", "bridge-svc", "services"} {
		err := filepath.WalkDir(filepath.Join(root, svc), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "testdata" || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.ValueSpec:
					for i, name := range n.Names {
						if checked(name.Name) && i < len(n.Values) {
							check(fset, name.Pos(), name.Name, n.Values[i])
						}
					}
				case *ast.CompositeLit:
					if id, ok := n.Type.(*ast.Ident); ok && id.Name == "Error" && len(n.Elts) >= 2 {
						if sel, ok := n.Elts[0].(*ast.SelectorExpr); ok && isIdent(sel.X, "codes") {
							check(fset, n.Pos(), "a coded error's reason", n.Elts[1])
						}
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if found < 30 {
		t.Fatalf("found only %d domains and reasons; the walk is not reading what it should", found)
	}
}

// checked tells whether a constant of this name holds a domain or reason.
func checked(name string) bool {
	return strings.HasPrefix(name, "ErrorDomain") || strings.HasPrefix(name, "Reason")
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}
