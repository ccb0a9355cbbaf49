package decide_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/fleet-role/fleet-role/internal/decide"
	"github.com/fleet-role/fleet-role/internal/status"
)

// The history's marks run-length encoded and back; its times as
// milliseconds and back, also across a clock that stepped back.
func TestHistoryEncoding(t *testing.T) {
	for _, marks := range []string{"", "F", "FU", "FFFFUU?-", strings.Repeat("F", 37) + strings.Repeat("U", 13), "F-F-F-"} {
		enc := status.EncodeMarks([]byte(marks))
		dec, err := status.DecodeMarks(enc, len(marks))
		if err != nil || string(dec) != marks {
			t.Errorf("%q encoded %q decoded %q, %v", marks, enc, dec, err)
		}
	}
	if got := status.EncodeMarks([]byte(strings.Repeat("F", 37) + strings.Repeat("U", 13))); got != "F37U13" {
		t.Errorf("37 fit and 13 unfit encode as %q, want F37U13", got)
	}
	// Refused: an unknown mark, a count of zero, one past the decisions
	// left (one under is fine), marks short of the decisions.
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"X", 1, "no mark"},
		{"F0", 1, "count"},
		{"F3", 2, "count"},
		{"F2U", 2, "more than"},
		{"F2", 3, "want one for each"},
	} {
		if _, err := status.DecodeMarks(tc.s, tc.n); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("DecodeMarks(%q, %d) = %v, want an error saying %q", tc.s, tc.n, err, tc.want)
		}
	}
	if dec, err := status.DecodeMarks("F2U", 3); err != nil || string(dec) != "FFU" {
		t.Errorf("DecodeMarks(F2U, 3) = %q, %v", dec, err)
	}
	t0 := time.Date(2026, 12, 5, 11, 0, 0, 0, time.UTC)
	times := []time.Time{t0, t0.Add(500 * time.Millisecond), t0.Add(1500 * time.Millisecond), t0.Add(time.Second)} // the last stepped back
	h := status.History{TimesMS: status.EncodeTimes(times)}
	got := h.DecodeTimes()
	for i := range times {
		if !got[i].Equal(times[i]) {
			t.Errorf("time %d: %v, want %v", i, got[i], times[i])
		}
	}
	if h.TimesMS[1] != 500 || h.TimesMS[3] != -500 {
		t.Errorf("times as milliseconds %v, want deltas 500 ... -500", h.TimesMS)
	}
}

// The history is no part of what the fingerprint compares (it gains a
// decision every round), and no reduced form carries it: each counts it as
// dropped. A document whose whole decision fits only without the history
// is written whole without it, before any reason is left out.
func TestHistoryInTheDocument(t *testing.T) {
	f := standardFleet(k3s())
	f.host("alpha").slowWAL = true
	st := decide.Decide(f.input(t, settled(f, 10*time.Minute)))
	bare := fingerprint(t, st)
	st.History = &status.History{TimesMS: []int64{1, 500}, Hosts: []status.HostHistory{{Name: "alpha", Marks: "FU"}}}
	if fingerprint(t, st) != bare {
		t.Error("the history changes the fingerprint")
	}
	full, err := st.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := status.UnmarshalStatus(full)
	if err != nil || back.Form != status.FormFull || back.History == nil || back.History.Hosts[0].Marks != "FU" {
		t.Fatalf("the full document's history read back: %+v (form %s, %v)", back.History, back.Form, err)
	}
	// A limit the history does not fit in beside the whole decision.
	st.History.Hosts[0].Marks = strings.Repeat("FU", 5000)
	st.History.TimesMS = make([]int64, 10000)
	alone := st
	alone.History = nil
	whole, err := alone.MarshalWithin(1 << 30) // indented, without the history
	if err != nil {
		t.Fatal(err)
	}
	without, err := st.MarshalWithin(len(whole))
	if err != nil {
		t.Fatal(err)
	}
	if compact, _ := json.Marshal(st); len(compact) <= len(whole) {
		t.Fatalf("the history (%d bytes compact with it) fits beside the whole decision (%d): the test needs one that does not", len(compact), len(whole))
	}
	var doc struct {
		Form    string            `json:"form"`
		Dropped []status.Dropped  `json:"dropped"`
		History json.RawMessage   `json:"history"`
		Hosts   []json.RawMessage `json:"hosts"`
	}
	if err := json.Unmarshal(without, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Form != status.FormFull || doc.History != nil || len(doc.Dropped) != 1 || doc.Dropped[0] != (status.Dropped{Part: status.PartHistory, Count: 10000}) {
		t.Errorf("within the whole decision's own size: form %s, dropped %v, history %d bytes; want full, the history's 10000 decisions dropped", doc.Form, doc.Dropped, len(doc.History))
	}
}

// After the settings shrink the window, a record still holds the window it
// was written at until its probe writes again: read with the limits of the
// window before (Input.ReadWindow), it is judged over its newest samples at
// the new window, where with the new limits alone it is refused. A window
// shrunk to no less than half reads without it (the limits allow twice the
// window); to less than half, not.
func TestShrunkWindowReadsOldRecords(t *testing.T) {
	f := standardFleet(k3s()) // window 100, p99
	in := f.input(t, settled(f, 10*time.Minute))
	for _, tc := range []struct {
		window, readWindow int
		read               bool
	}{
		{50, 0, true},   // half: within the new limits
		{49, 0, false},  // under half: over them
		{49, 100, true}, // with the window before
		{20, 100, true}, // a fifth, with it
		{20, 50, true},  // a read window of half the one written, as the window's own limits allow
		{20, 49, false}, // under half
	} {
		in.Settings.Window, in.Settings.TailPercentile = tc.window, 0.95
		in.ReadWindow = tc.readWindow
		st := decide.Decide(in)
		for _, h := range st.Hosts {
			if tc.read && (h.Samples != tc.window || h.Verdict != status.Fit) {
				t.Errorf("window %d, read window %d: %s has %d samples, %s; want the newest %d, fit", tc.window, tc.readWindow, h.Name, h.Samples, h.Verdict, tc.window)
			}
			if !tc.read && h.Verdict != status.Unknown {
				t.Errorf("window %d, read window %d: %s read as %s (%d samples), want unknown: over the limits", tc.window, tc.readWindow, h.Name, h.Verdict, h.Samples)
			}
		}
	}
}
