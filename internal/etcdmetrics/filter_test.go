package etcdmetrics

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// Dropping the families Parse does not read, and the series of removed
// members, changes nothing the reading says: every captured page gives the
// same reading with and without the filter (restart-before.prom holds a
// removed member's series), and the same snapshot but for removed members.
func TestFilterKeepsWhatParseReads(t *testing.T) {
	for path, page := range capturedPages(t) {
		whole, err := parseText(page)
		if err != nil {
			t.Fatalf("%s unfiltered: %v", path, err)
		}
		kept := keepFamilies(page)
		filtered, err := parseText(kept)
		if err != nil {
			t.Fatalf("%s filtered: %v", path, err)
		}
		if w, f := Gained(nil, whole), Gained(nil, filtered); !reflect.DeepEqual(w, f) {
			t.Errorf("%s: filtered reading differs:\nwhole    %+v\nfiltered %+v", path, w, f)
		}
		known := map[string]bool{}
		for _, id := range whole.KnownPeers {
			known[id] = true
		}
		for id := range whole.PeerRTT {
			if !known[id] {
				delete(whole.PeerRTT, id)
				t.Logf("%s: removed member %s's round trips left out", path, id)
			}
		}
		for id, v := range whole.ActivePeers {
			if !known[id] && v == 0 {
				delete(whole.ActivePeers, id)
			}
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

// capturedPages are the pages of testdata/, by file name.
func capturedPages(t *testing.T) map[string][]byte {
	t.Helper()
	paths, err := filepath.Glob("testdata/*.prom")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no captured pages: %v", err)
	}
	pages := map[string][]byte{}
	for _, path := range paths {
		page, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		pages[filepath.Base(path)] = page
	}
	return pages
}
