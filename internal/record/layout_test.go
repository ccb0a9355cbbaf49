package record_test

import (
	"bytes"
	"compress/flate"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/fleet-role/fleet-role/internal/entry"
	"github.com/fleet-role/fleet-role/internal/record"
	"github.com/fleet-role/fleet-role/lab/kit/testkit"
)

// store is a record and its tail as the API server would hold them after
// each planned write.
type store struct {
	rec, tail *corev1.ConfigMap
}

func (s *store) put(t *testing.T, node string, p record.Plan) {
	t.Helper()
	owner := record.Owner{Name: node, UID: "u"}
	switch p.Kind {
	case record.KindEntry:
		s.rec = record.Object("r", owner, p.Text)
	case record.KindWindow:
		s.rec = record.WindowObject("r", owner, p.Packed)
	case record.KindTail:
		s.tail = record.TailObject("r", owner, p.Packed)
	}
}

// A probe's window, written period after period through the Writer, reads
// back exactly as the entry layout would have held it, every period, on a
// standby and on a voter; and the tail layout costs what its rule says.
func TestTailLayoutReadsAsTheWholeWindow(t *testing.T) {
	voters := []string{"server-1", "server-2", "server-3"}
	t0 := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name string
		self int
	}{{"standby", -1}, {"voter", 1}} {
		t.Run(c.name, func(t *testing.T) {
			const window, periods = 100, 250
			// The samples of a long run: a realistic window of 250,
			// appended one at a time to a window of 100.
			all := testkit.RealisticEntry("host-07", voters, c.self, periods, 15*time.Second, t0)
			var w record.Writer
			var s store
			e := entry.Entry{Node: all.Node, Fsync: all.Fsync}
			kinds := map[record.Kind]int{}
			var payload int
			for i, smp := range all.Samples {
				entry.Append(&e, smp, window)
				text, err := entry.Encode(e)
				if err != nil {
					t.Fatal(err)
				}
				p := w.Plan(text)
				s.put(t, all.Node, p)
				w.Wrote(p)
				kinds[p.Kind]++
				if i >= window {
					payload += len(p.Packed)
				}
				_, got, err := record.Assemble(s.rec, s.tail)
				if err != nil {
					t.Fatalf("period %d (%s): %v", i, p.Kind, err)
				}
				if got != text {
					t.Fatalf("period %d (%s): the record reads\n%s\nwant\n%s", i, p.Kind, got, text)
				}
			}
			if kinds[record.KindEntry] != 0 || kinds[record.KindTail] < periods/2 {
				t.Fatalf("writes %v: want tails in most periods and no entry", kinds)
			}
			whole, _ := entry.Encode(e)
			t.Logf("%s: writes %v; payload a period over the last %d: %d bytes packed, against the whole entry's %d",
				c.name, kinds, periods-window, payload/(periods-window), len(whole))
			if got := payload / (periods - window); 3*got > len(whole) {
				t.Errorf("payload a period %d bytes, over a third of the whole entry's %d", got, len(whole))
			}
		})
	}
}

// A marker (no samples) is written in the entry layout, where every
// release reads it, and the next window after it is a snapshot.
func TestMarkerInTheEntryLayout(t *testing.T) {
	var w record.Writer
	marker, _ := entry.Encode(entry.Entry{Node: "a", Refused: "too large"})
	if p := w.Plan(marker); p.Kind != record.KindEntry || p.Text != marker {
		t.Fatalf("marker planned as %s", p.Kind)
	}
	e := testkit.RealisticEntry("a", []string{"v"}, -1, 3, time.Second, time.Unix(0, 0))
	text, _ := entry.Encode(e)
	p := w.Plan(text)
	if p.Kind != record.KindWindow {
		t.Fatalf("first window planned as %s", p.Kind)
	}
	w.Wrote(p)
	w.Wrote(record.Plan{Kind: record.KindEntry, Text: marker})
	if p := w.Plan(text); p.Kind != record.KindWindow {
		t.Fatalf("window after a marker planned as %s", p.Kind)
	}
}

// A tail that extends an older snapshot is passed over: the record reads
// as its snapshot.
func TestStaleTailPassedOver(t *testing.T) {
	owner := record.Owner{Name: "a", UID: "u"}
	e := testkit.RealisticEntry("a", []string{"v"}, -1, 5, time.Second, time.Unix(0, 0))
	first := e
	first.Samples = e.Samples[:3]
	t1, _ := entry.Encode(first)
	t2, _ := entry.Encode(e)
	tailOf, _ := entry.Encode(entry.Entry{Node: "a", Samples: e.Samples[3:]})
	old := record.Pack(t1)
	rec := record.WindowObject("r", owner, record.Pack(t2))
	tail := record.TailObject("r", owner, record.PackTail(record.Base(old), 0, tailOf))
	if _, got, err := record.Assemble(rec, tail); err != nil || got != t2 {
		t.Fatalf("read %q %v, want the snapshot alone", got, err)
	}
	// And the same tail on its own snapshot extends it.
	rec = record.WindowObject("r", owner, old)
	if _, got, err := record.Assemble(rec, tail); err != nil || got != t2 {
		t.Fatalf("read %q %v, want the snapshot and its tail", got, err)
	}
}

// Unpacking stops at the most a ConfigMap holds, whatever the packed bytes
// say: a few KB that would inflate past it are refused, not inflated.
func TestUnpackBounded(t *testing.T) {
	for _, c := range []struct {
		name string
		n    int
		ok   bool
	}{{"at", record.MaxEntryBytes, true}, {"under", record.MaxEntryBytes - 1, true}, {"over", record.MaxEntryBytes + 1, false}} {
		packed := record.Pack(strings.Repeat(" ", c.n))
		text, err := record.Unpack(packed)
		if c.ok != (err == nil) || c.ok && len(text) != c.n {
			t.Errorf("%s (%d bytes, %d packed): %d bytes, %v", c.name, c.n, len(packed), len(text), err)
		}
	}
	// A bomb: 64 MiB of one byte, about 64 KB packed.
	var b bytes.Buffer
	fw, _ := flate.NewWriter(&b, flate.BestCompression)
	fw.Write(make([]byte, 64<<20))
	fw.Close()
	if _, err := record.Unpack(b.Bytes()); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("a bomb of %d bytes: %v", b.Len(), err)
	}
	for _, bad := range [][]byte{nil, {1, 2, 3}, []byte("not deflate at all")} {
		if _, err := record.Unpack(bad); err == nil {
			t.Errorf("unpacked %q", bad)
		}
		if _, _, _, err := record.UnpackTail(bad); err == nil {
			t.Errorf("unpacked tail %q", bad)
		}
	}
}

// A tail's shape is checked as a record's is: another node's owner, other
// keys, a tail of another node's samples.
func TestTailShape(t *testing.T) {
	owner := record.Owner{Name: "a", UID: "u"}
	e := testkit.RealisticEntry("a", []string{"v"}, -1, 5, time.Second, time.Unix(0, 0))
	base := e
	base.Samples = e.Samples[:3]
	bt, _ := entry.Encode(base)
	packed := record.Pack(bt)
	rec := record.WindowObject("r", owner, packed)
	tailOf := func(node string) []byte {
		text, _ := entry.Encode(entry.Entry{Node: node, Samples: e.Samples[3:]})
		return record.PackTail(record.Base(packed), 0, text)
	}
	for _, c := range []struct {
		name string
		mod  func(*corev1.ConfigMap)
		want string
	}{
		{"another node's owner", func(cm *corev1.ConfigMap) { cm.OwnerReferences[0].Name = "b" }, `owned by Node "b"`},
		{"a data key", func(cm *corev1.ConfigMap) { cm.Data = map[string]string{"entry": "{}"} }, "holds other than"},
		{"another node's samples", func(cm *corev1.ConfigMap) { cm.BinaryData[record.TailKey] = tailOf("b") }, `tail of node "b"`},
		{"drops more than the window holds", func(cm *corev1.ConfigMap) {
			text, _ := entry.Encode(entry.Entry{Node: "a", Samples: e.Samples[3:]})
			cm.BinaryData[record.TailKey] = record.PackTail(record.Base(packed), 4, text)
		}, "drops 4 samples of a window of 3"},
	} {
		tail := record.TailObject("r", owner, tailOf("a"))
		c.mod(tail)
		if _, _, err := record.Assemble(rec, tail); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	// The names: the suffix, and none for a node whose name leaves no room.
	if n, ok := record.TailName("a"); !ok || n != "a.tail" {
		t.Errorf("tail of a: %q %v", n, ok)
	}
	for _, c := range []struct {
		n  int
		ok bool
	}{{248, true}, {249, false}} {
		if _, ok := record.TailName(strings.Repeat("a", c.n)); ok != c.ok {
			t.Errorf("tail of a name of %d: %v", c.n, ok)
		}
	}
	tail := record.TailObject("r", owner, tailOf("a"))
	if record.NodeOf(tail) != "a" || !record.IsTail(tail) || record.IsRecord(tail) {
		t.Errorf("tail %s read as node %q", tail.Name, record.NodeOf(tail))
	}
}

// A reader that knows the record cap (the controller's Assembler) unpacks
// no more than it: a packed window that reads as more, at just over the
// limit, is unreadable, at the limit it is read; and data.entry beside a
// packed window (an older probe's write over it) is the one read.
func TestAssemblerLimitAndOlderWrite(t *testing.T) {
	owner := record.Owner{Name: "a", UID: "u"}
	e := testkit.RealisticEntry("a", []string{"v"}, -1, 5, time.Second, time.Unix(0, 0))
	text, _ := entry.Encode(e)
	rec := record.WindowObject("r", owner, record.Pack(text))
	rec.ResourceVersion = "7"
	for _, c := range []struct {
		limit int
		ok    bool
	}{{len(text) - 1, false}, {len(text), true}, {len(text) + 1, true}} {
		a := &record.Assembler{Limit: c.limit}
		entries, unreadable := a.ReadAll([]*corev1.ConfigMap{rec})
		if c.ok != (entries["a"] == text) || !c.ok && !strings.Contains(unreadable["a"], "the record cap") {
			t.Errorf("limit %d (the window %d bytes): entries %d, unreadable %q", c.limit, len(text), len(entries), unreadable)
		}
	}
	older := rec.DeepCopy()
	older.Data = map[string]string{record.DataKey: "{}"}
	if _, got, err := record.Assemble(older, nil); err != nil || got != "{}" {
		t.Errorf("data.entry beside a window read %q %v, want data.entry", got, err)
	}
}
