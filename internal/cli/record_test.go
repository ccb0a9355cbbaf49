package cli_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/fleet-role/fleet-role/internal/cli"
	"github.com/fleet-role/fleet-role/internal/entry"
	"github.com/fleet-role/fleet-role/internal/record"
	"github.com/fleet-role/fleet-role/lab/kit/testkit"
)

// `fleet-role record -f` prints each record as the controller reads it: a
// record in the tail layout unpacked and merged with its tail, one in the
// entry layout as it is, the same JSON either way; one that cannot be read
// named, with exit 2.
func TestRecordPrintsEveryLayoutAsJSON(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	voters := []string{"server-1", "server-2", "server-3"}
	// Host a in the tail layout: a window of 10 and a tail of 2 more.
	a := testkit.RealisticEntry("a", voters, -1, 12, 15*time.Second, t0)
	var w record.Writer
	var rec, tail *corev1.ConfigMap
	var want string
	for n := 10; n <= 12; n++ {
		e := a
		e.Samples = a.Samples[:n]
		text, err := entry.Encode(e)
		if err != nil {
			t.Fatal(err)
		}
		p := w.Plan(text)
		switch p.Kind {
		case record.KindWindow:
			rec = record.WindowObject("fleet-role-records", record.Owner{Name: "a", UID: "u"}, p.Packed)
		case record.KindTail:
			tail = record.TailObject("fleet-role-records", record.Owner{Name: "a", UID: "u"}, p.Packed)
		}
		w.Wrote(p)
		want = text
	}
	if rec == nil || tail == nil {
		t.Fatal("the writer wrote no window and tail")
	}
	// Host b in the entry layout.
	bText, _ := entry.Encode(testkit.RealisticEntry("b", voters, 0, 3, 15*time.Second, t0))
	b := record.Object("fleet-role-records", record.Owner{Name: "b", UID: "u"}, bText)
	write := func(cms ...*corev1.ConfigMap) string {
		items := make([]corev1.ConfigMap, len(cms))
		for i, cm := range cms {
			items[i] = *cm
		}
		data, err := json.Marshal(map[string]any{"kind": "List", "apiVersion": "v1", "items": items})
		if err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(t.TempDir(), "records.json")
		if err := os.WriteFile(f, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}
	f := write(rec, tail, b)
	var out, errOut bytes.Buffer
	if code := cli.Main([]string{"record", "-f", f}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("output is no JSON object: %v\n%s", err, out.String())
	}
	for node, text := range map[string]string{"a": want, "b": bText} {
		var compact bytes.Buffer
		if err := json.Compact(&compact, got[node]); err != nil || compact.String() != text {
			t.Errorf("node %s printed as\n%s\nwant\n%s", node, compact.String(), text)
		}
	}
	// NODE alone, indented.
	out.Reset()
	if code := cli.Main([]string{"record", "-f", f, "a"}, &out, &errOut); code != 0 || !strings.HasPrefix(out.String(), "{\n  \"v\": 1,") {
		t.Errorf("record a: exit %d, %q", code, out.String())
	}
	// A tail of another node's samples: named, exit 2.
	bad := tail.DeepCopy()
	other, _ := entry.Encode(entry.Entry{Node: "z", Samples: a.Samples[10:]})
	bad.BinaryData[record.TailKey] = record.PackTail(record.Base(rec.BinaryData[record.WindowKey]), 0, other)
	out.Reset()
	errOut.Reset()
	if code := cli.Main([]string{"record", "-f", write(rec, bad, b)}, &out, &errOut); code != 2 ||
		!strings.Contains(errOut.String(), `record of a cannot be read: tail a.tail: tail of node "z" extends the window of "a"`) {
		t.Errorf("a tail of another node: exit %d, stderr %q", code, errOut.String())
	}
	if code := cli.Main([]string{"record", "-f", f, "c"}, &out, &errOut); code != 2 {
		t.Errorf("an absent node: exit %d", code)
	}
}
