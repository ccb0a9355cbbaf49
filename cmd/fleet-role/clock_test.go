package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// readsTime are the functions of package time that read the clock or wait
// on it. Each component reads time from one clock, injected where a test
// steps it (the probe's loop, the controller, the election) and the real
// one where a reading is of real time (a latency, a timer's lateness): so
// the product's code calls these only in a file of its own named clock.go.
var readsTime = []string{"Now", "Since", "Until", "After", "AfterFunc", "NewTimer", "NewTicker", "Tick", "Sleep"}

// TestProductReadsTimeThroughItsClocks looks in every product source file
// (internal/ and this command, tests left out) for a use of one of
// readsTime, called or taken as a value, outside a clock.go.
func TestProductReadsTimeThroughItsClocks(t *testing.T) {
	var found []string
	files := 0
	for _, root := range []string{"../../internal", "."} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "testdata" || strings.HasSuffix(d.Name(), "test") && path != root) {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			files++
			if filepath.Base(path) == "clock.go" {
				return nil
			}
			hits, err := timeReads(path)
			found = append(found, hits...)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if files < 50 {
		t.Fatalf("read %d product files; is the walk looking in the right place?", files)
	}
	if len(found) > 0 {
		t.Errorf("the product reads time outside a clock.go (read it through the component's clock, or, for a reading of real time, the package's clock.go):\n  %s", strings.Join(found, "\n  "))
	}
}

// timeReads lists the uses of readsTime in the Go file at path.
func timeReads(path string) ([]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	names := map[string]bool{} // what the file calls package time
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == "time" {
			name := "time"
			if imp.Name != nil {
				name = imp.Name.Name
			}
			names[name] = true
		}
	}
	var hits []string
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if x, ok := sel.X.(*ast.Ident); ok && names[x.Name] && x.Name != "_" && slices.Contains(readsTime, sel.Sel.Name) {
			hits = append(hits, fset.Position(sel.Pos()).String()+": time."+sel.Sel.Name)
		}
		return true
	})
	return hits, nil
}

// The search finds what it looks for: a call, a function taken as a value,
// a use through an aliased import; and leaves a type, a constant and a
// method of a value.
func TestTimeReadsFindsTheUses(t *testing.T) {
	for _, c := range []struct {
		src  string
		want []string
	}{
		{`package x

import "time"

var d time.Duration = time.Second
var f = time.Now

func g(t time.Time) time.Duration { return time.Since(t) + t.Sub(t) + d }
`, []string{"time.Now", "time.Since"}},
		{`package x

import clk "time"

func g(d clk.Duration) { <-clk.After(d) }
`, []string{"time.After"}},
		{`package x

import "fmt"

type time struct{}

func (time) Now() {}

func g() { var time time; time.Now(); fmt.Println() }
`, nil},
	} {
		path := filepath.Join(t.TempDir(), "x.go")
		if err := os.WriteFile(path, []byte(c.src), 0o644); err != nil {
			t.Fatal(err)
		}
		hits, err := timeReads(path)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, h := range hits {
			got = append(got, h[strings.LastIndex(h, ": ")+2:])
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("found %v, want %v in\n%s", got, c.want, c.src)
		}
	}
}
