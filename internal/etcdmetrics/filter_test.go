package etcdmetrics

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// Dropping the families Parse does not read changes nothing it reads: every
// captured page gives the same snapshot with and without the filter.
func TestFilterKeepsWhatParseReads(t *testing.T) {
	pages, err := filepath.Glob("testdata/*.prom")
	if err != nil || len(pages) == 0 {
		t.Fatalf("no captured pages: %v", err)
	}
	for _, path := range pages {
		page, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		whole, err := parseText(page)
		if err != nil {
			t.Fatalf("%s unfiltered: %v", path, err)
		}
		kept := keepFamilies(page)
		filtered, err := parseText(kept)
		if err != nil {
			t.Fatalf("%s filtered: %v", path, err)
		}
		if !reflect.DeepEqual(whole, filtered) {
			t.Errorf("%s: filtered snapshot differs:\nwhole    %+v\nfiltered %+v", path, whole, filtered)
		}
		if len(kept)*4 > len(page) {
			t.Errorf("%s: kept %d of %d bytes, want under a quarter", path, len(kept), len(page))
		}
	}
}

func BenchmarkParse(b *testing.B) {
	page, err := os.ReadFile("testdata/leader.prom")
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		parse func([]byte) (*Snapshot, error)
	}{{"filtered", func(p []byte) (*Snapshot, error) { return parseText(keepFamilies(p)) }}, {"whole", parseText}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(page)))
			for b.Loop() {
				if _, err := c.parse(page); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
