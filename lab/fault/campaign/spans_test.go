//go:build linux

package campaign

import (
	"reflect"
	"testing"
	"time"
)

// A span opens at its first "on" and closes at the first "off" after it;
// repeated marks change nothing, and a span still open ends at now.
func TestSpans(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	s := newSpans()
	s.mark("a", false, at(0), at(0)) // off while closed: nothing
	s.mark("a", true, at(1), at(1))
	s.mark("a", true, at(2), at(2)) // on while open: the span keeps its start
	s.mark("a", false, at(5), at(4))
	s.mark("b", true, at(6), at(6))
	got := s.all(at(9))
	want := map[string][]Interval{
		"a": {{From: at(1), To: at(4)}},
		"b": {{From: at(6), To: at(9)}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("spans: got %v, want %v", got, want)
	}
}

// The next fault waits until every window holds only samples taken after
// the last one ended: the window's periods and the one straddling the end.
func TestResidue(t *testing.T) {
	r := Ranges{Period: 2 * time.Second, Window: 10}
	if got, want := r.residue(), 22*time.Second; got != want {
		t.Fatalf("residue: got %v, want %v", got, want)
	}
}

// A load that could not be read (-1) is left out of the board's figures.
func TestFaultLoads(t *testing.T) {
	got := faultLoads([]Fault{{Load: 3}, {Load: -1}, {Load: 1.5}})
	if !reflect.DeepEqual(got, []float64{1.5, 3}) {
		t.Fatalf("loads: %v", got)
	}
	if l := load1(); l < 0 {
		t.Fatalf("load1: /proc/loadavg unreadable")
	}
}
