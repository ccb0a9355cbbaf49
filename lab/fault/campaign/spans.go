//go:build linux

package campaign

import "time"

// spans keeps each voter's spans of some state (without a leader, a record
// gone stale): the one still open and those closed. Its owner holds the
// lock.
type spans struct {
	open   map[string]time.Time  // a voter's current span, when one is open
	closed map[string][]Interval // each voter's closed spans
}

func newSpans() spans {
	return spans{open: map[string]time.Time{}, closed: map[string][]Interval{}}
}

// mark opens voter's span at from when on and none is open, and closes the
// open one at to when off.
func (s *spans) mark(voter string, on bool, from, to time.Time) {
	start, open := s.open[voter]
	switch {
	case on && !open:
		s.open[voter] = from
	case !on && open:
		s.closed[voter] = append(s.closed[voter], Interval{From: start, To: to})
		delete(s.open, voter)
	}
}

// all is every voter's spans, those still open closed at now.
func (s *spans) all(now time.Time) map[string][]Interval {
	out := map[string][]Interval{}
	for v, is := range s.closed {
		out[v] = append(out[v], is...)
	}
	for v, from := range s.open {
		out[v] = append(out[v], Interval{From: from, To: now})
	}
	return out
}
