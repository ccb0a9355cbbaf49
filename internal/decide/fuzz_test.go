package decide_test

import (
	"bytes"
	"maps"
	"os"
	"path/filepath"
	"testing"

	"github.com/fleet-role/fleet-role/internal/decide"
	"github.com/fleet-role/fleet-role/internal/status"
)

// statusSeeds adds every golden status document as a seed.
func statusSeeds(f *testing.F) {
	paths, err := filepath.Glob(filepath.Join("testdata", "*", "status.json"))
	if err != nil || len(paths) == 0 {
		f.Fatalf("no status.json under testdata: %v", err)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{`{}`, `null`, `{"schema":1}`, `{"kind":"ConfigMap","data":{}}`, `{"kind":"ConfigMap","data":{"status.json":"{}"}}`} {
		f.Add([]byte(s))
	}
}

// FuzzUnmarshalStatus: any text is refused or reads into a status whose
// document reads back to the same document.
func FuzzUnmarshalStatus(f *testing.F) {
	statusSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := status.UnmarshalStatus(data)
		if err != nil {
			return
		}
		doc, err := s.Marshal()
		if err != nil {
			t.Fatalf("a read status does not encode: %v", err)
		}
		back, err := status.UnmarshalStatus(doc)
		if err != nil {
			t.Fatalf("an encoded status does not read: %v\n%s", err, doc)
		}
		again, err := back.Marshal()
		if err != nil || !bytes.Equal(again, doc) {
			t.Fatalf("the status document is not stable: %v\n%s\n%s", err, doc, again)
		}
	})
}

// FuzzStatusFromJSON: a status document or a ConfigMap holding one; any
// text is refused or read, never a panic.
func FuzzStatusFromJSON(f *testing.F) {
	statusSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		if s, err := status.StatusFromJSON(data); err == nil && s == nil {
			t.Fatal("no status and no error")
		}
	})
}

// FuzzDecideHostileEntry: one voter's entry is any text (issue 11: one bad entry must
// not take the controller down). The decision never panics, and reports
// that host whatever its entry holds.
func FuzzDecideHostileEntry(f *testing.F) {
	fleet := standardFleet(k3s())
	base := fleet.input(f, nil)
	const victim = "alpha"
	f.Add(base.Entries[victim])
	for _, s := range []string{
		`{"v":1,"node":"alpha","n":1125899906842624,"dt_ms":[]}`, // issue 11's crasher
		`{"v":1,"node":"alpha","n":0,"dt_ms":[],"link":[],"mem_total_kib":[],"mem_available_kib":[]}`,
		``, `null`, `{"v":1,"v":1}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		in := base
		in.Entries = maps.Clone(base.Entries)
		in.Entries[victim] = raw
		st := decide.Decide(in)
		for _, h := range st.Hosts {
			if h.Name == victim {
				return
			}
		}
		t.Fatalf("the decision does not report %s", victim)
	})
}
