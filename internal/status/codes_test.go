package status

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestCodesDocumented: every code is in docs/status.md, once declared, and
// every plan code belongs to a step: a reader of the status can look any
// code up, and a new code cannot be published unexplained.
func TestCodesDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/status.md")
	if err != nil {
		t.Fatal(err)
	}
	f, err := parser.ParseFile(token.NewFileSet(), "codes.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			for _, v := range vs.Values {
				lit, ok := v.(*ast.BasicLit)
				if !ok {
					continue
				}
				code, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatal(err)
				}
				if seen[code] {
					t.Errorf("code %s declared twice", code)
				}
				seen[code] = true
				if !strings.Contains(string(doc), "`"+code+"`") {
					t.Errorf("code %s is not in docs/status.md", code)
				}
			}
		}
	}
	if len(seen) < len(codeSignal) {
		t.Fatalf("found %d codes in codes.go, fewer than the %d plan codes", len(seen), len(codeSignal))
	}
	for c, s := range codeSignal {
		if s == "" || !seen[string(c)] {
			t.Errorf("plan code %s: step %q, declared %v", c, s, seen[string(c)])
		}
	}
}
