package statuspage

import (
	"fmt"

	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/status"
)

// Matrix is the link matrix: a row per host the decision lists (also one
// with no record, whose row says why it has no readings), a column per etcd
// member, each cell what the row's host measured of its path to the
// column's member, as the status's links publish it.
type Matrix struct {
	Peers []string
	Rows  []MatrixRow
	// Dropped counts the cells this document's form left out (a large
	// fleet's some_links, some_hosts or bare form); Missing is set when the
	// document has no link matrix at all (one written before it had).
	Dropped int
	Missing bool
}

// MatrixRow is one measuring host's links.
type MatrixRow struct {
	Host    string
	Verdict status.Verdict
	// Note says why the row has no readings at all (no record, an
	// unreadable one, too few samples, left out of the document); empty
	// when it has some.
	Note  string
	Cells []Cell
}

// Cell is one link, measured from the row's host to the column's member.
type Cell struct {
	Self    bool // the row's host is the column's member
	Connect Reading
	// RTT is etcd's own peer round trip, which only a member measures.
	RTT  Reading
	Slow bool
}

// Reading is one tail figure of a link against its limit: a copy of the
// status's status.LinkReading, which the page keeps between decisions
// without the status it came from.
type Reading struct {
	// Present: the host makes this reading of the link (it connects to the
	// member; its etcd observed a round trip).
	Present bool
	// Seconds is the tail, when HasSeconds: not when the connects at the
	// tail failed, none was made, or etcd's histograms could not be merged.
	Seconds    float64
	HasSeconds bool
	Count      int
	Over       int
	Failed     int
	Unmerged   int
	OK         bool
}

func readingOf(x *status.LinkReading) Reading {
	if x == nil {
		return Reading{}
	}
	r := Reading{Present: true, Count: x.Count, Over: x.Over, Failed: x.Failed, Unmerged: x.Unmerged, OK: x.OK}
	if x.Seconds != nil {
		r.Seconds, r.HasSeconds = *x.Seconds, true
	}
	return r
}

// matrixOf lays the status's link matrix out over rows: the columns are the
// etcd members among them, in their order.
func matrixOf(st *status.Status, rows []HostRow) Matrix {
	m := Matrix{Missing: st.Links == nil}
	for _, x := range st.Dropped {
		if x.Part == status.PartLinks {
			m.Dropped = x.Count
		}
	}
	col := map[string]int{}
	for _, h := range rows {
		if h.Role == status.RoleVoter || h.Role == status.RoleLearner {
			col[h.Name] = len(m.Peers)
			m.Peers = append(m.Peers, h.Name)
		}
	}
	links := make(map[string]*status.LinkRow, len(st.Links))
	for i := range st.Links {
		links[st.Links[i].From] = &st.Links[i]
	}
	for _, h := range rows {
		r := MatrixRow{Host: h.Name, Verdict: h.Verdict, Cells: make([]Cell, len(m.Peers))}
		if i, ok := col[h.Name]; ok {
			r.Cells[i].Self = true
		}
		if lr := links[h.Name]; lr != nil {
			for _, c := range lr.To {
				i, ok := col[c.Peer]
				if !ok {
					continue // a member this form of the document does not list
				}
				r.Cells[i] = Cell{Connect: readingOf(c.Connect), RTT: readingOf(c.RTT), Slow: c.Slow}
			}
		} else {
			r.Note = rowNote(h, m)
		}
		m.Rows = append(m.Rows, r)
	}
	return m
}

// rowNote says why a host has no row of links: the reason it is unknown
// (no record, too few samples), or that the document left its row out.
func rowNote(h HostRow, m Matrix) string {
	switch {
	case h.Verdict == status.Unknown && h.Deciding != nil:
		return status.Summary(*h.Deciding)
	case m.Missing:
		return "this status document has no link matrix"
	case m.Dropped > 0:
		return "its links were left out of this document's form"
	}
	return "no link measured"
}

// mark is a reading as the cell shows it: its number and a mark, so that
// it reads without colour, and the failed connects when there were any.
func (r Reading) mark() string {
	var s string
	switch {
	case !r.Present || r.Count == 0 && !r.HasSeconds && r.Unmerged == 0:
		return "· none"
	case r.Unmerged > 0:
		s = "? not judged"
	case !r.HasSeconds:
		s = "✗ failed"
	case r.OK:
		s = status.FormatValue(r.Seconds, "seconds") + " ✓"
	default:
		s = status.FormatValue(r.Seconds, "seconds") + " ✗"
	}
	if r.Failed > 0 {
		s += fmt.Sprintf(", %d of %d failed", r.Failed, r.Count)
	}
	return s
}

// class is the reading's colour: within its limit, over it, its tail of
// failures (hatched), not judged, or nothing read.
func (r Reading) class() string {
	switch {
	case !r.Present || r.Count == 0 && !r.HasSeconds && r.Unmerged == 0:
		return "none"
	case r.Unmerged > 0:
		return "unk"
	case !r.HasSeconds:
		return "fail"
	case r.OK:
		return "ok"
	}
	return "bad"
}

// title is the reading in words, for the cell's tooltip: "p99 of 100
// connects: 801.1ms, must be at most 250ms; 100 over the limit or failed".
func (r Reading) title(what, pn string, limit settings.Limit) string {
	if !r.Present {
		return ""
	}
	s := fmt.Sprintf("p%s of %d %s: ", pn, r.Count, what)
	switch {
	case r.HasSeconds:
		s += status.FormatValue(r.Seconds, "seconds")
	case r.Failed > 0:
		s += "failed"
	default:
		s += "none"
	}
	s += ", must be " + mustBe(limit)
	if r.Over > 0 {
		s += fmt.Sprintf("; %d over the limit or failed", r.Over)
	}
	if r.Failed > 0 {
		s += fmt.Sprintf(", %d of them failed", r.Failed)
	}
	if r.Unmerged > 0 {
		s += fmt.Sprintf("; %d of the window's histograms could not be merged: not judged", r.Unmerged)
	}
	return s
}

// mustBe is a limit as it ends a sentence: "at most 250ms".
func mustBe(l settings.Limit) string {
	words := map[settings.Rule]string{settings.AtMost: "at most", settings.Under: "under", settings.AtLeast: "at least"}
	return words[l.Rule] + " " + status.FormatValue(l.Value, l.Unit)
}
