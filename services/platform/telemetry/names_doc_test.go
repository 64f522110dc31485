package telemetry_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// docPath is docs/observability.md relative to this package.
var docPath = filepath.Join("..", "..", "..", "docs", "observability.md")

// TestNamesAreDocumented fails when a constant of names.go — its Go name or
// its value — is missing from docs/observability.md, so the operators'
// reference cannot drift from the code.
func TestNamesAreDocumented(t *testing.T) {
	doc, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatalf("read %s: %v", docPath, err)
	}
	text := string(doc)
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "names.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if !name.IsExported() || i >= len(vs.Values) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					t.Errorf("%s: not a string literal; this test reads names.go's literals", name.Name)
					continue
				}
				value, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatal(err)
				}
				n++
				if !strings.Contains(text, "`"+name.Name+"`") {
					t.Errorf("%s: constant %s is not in %s (write it as `%s`)", fset.Position(name.Pos()), name.Name, docPath, name.Name)
				}
				if !strings.Contains(text, "`"+value+"`") {
					t.Errorf("%s: %s = %q is not in %s (write it as `%s`)", fset.Position(name.Pos()), name.Name, value, docPath, value)
				}
			}
		}
	}
	if n < 20 {
		t.Fatalf("found only %d string constants in names.go; the parser is not reading what it should", n)
	}
}
