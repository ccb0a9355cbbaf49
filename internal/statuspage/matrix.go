package statuspage

import (
	"strings"

	"github.com/fleet-role/fleet-role/internal/decide"
)

// Matrix is the link matrix: a row per host that measures (every host the
// decision lists, also one with no record, whose row says why it has no
// readings), a column per etcd member it connects to.
type Matrix struct {
	Peers []string
	Rows  []MatrixRow
	// Dropped is set when the document's form left the passing reasons
	// out, so that a cell without a reading may have had one.
	Dropped bool
}

// MatrixRow is one measuring host's links.
type MatrixRow struct {
	Host    string
	Verdict decide.Verdict
	// Note says why the row has no readings at all (no record, an
	// unreadable one, too few samples); empty when it has some.
	Note  string
	Cells []Cell
}

// Cell is one link, measured from the row's host to the column's member.
type Cell struct {
	Self    bool // the row's host is the column's member
	Connect Reading
	// RTT is etcd's own peer round trip, which only a member measures.
	RTT Reading
}

// Reading is one tail figure of a link against its limit.
type Reading struct {
	Measured bool
	Value    float64 // in seconds; meaningful when Measured and not Failed
	OK       bool
	// Failed: the connects at the tail failed, so there is no time.
	Failed bool
	// Detail is the reason's sentence, kept only for a reading that is not
	// ok (with the latest error's text): the page shows it on that cell.
	Detail string
}

// mirrored is the start of a slow link's copy on its other end
// (decide.mirrorSlowLinks): the measuring host's own reason is the one
// the matrix reads.
const mirrored = "measured by "

// matrixOf reads the link matrix out of the hosts' connect and peer_rtt
// reasons, the only place the decision publishes per-link figures today.
// When the decision core publishes a typed link matrix, this reads that
// instead; the page does not change.
func matrixOf(st *decide.Status, rows []HostRow) Matrix {
	m := Matrix{Dropped: st.Form != "" && st.Form != decide.FormFull}
	col := map[string]int{}
	for _, h := range rows {
		if h.Role == decide.RoleVoter || h.Role == decide.RoleLearner {
			col[h.Name] = len(m.Peers)
			m.Peers = append(m.Peers, h.Name)
		}
	}
	byName := make(map[string]*decide.Host, len(st.Hosts))
	for i := range st.Hosts {
		byName[st.Hosts[i].Name] = &st.Hosts[i]
	}
	for _, row := range rows {
		r := MatrixRow{Host: row.Name, Verdict: row.Verdict, Cells: make([]Cell, len(m.Peers))}
		if i, ok := col[row.Name]; ok {
			r.Cells[i].Self = true
		}
		readings := 0
		for _, x := range byName[row.Name].Reasons {
			if x.Signal != decide.SignalConnect && x.Signal != decide.SignalPeerRTT || strings.HasPrefix(x.Detail, mirrored) {
				continue
			}
			i, ok := col[x.Subject]
			if !ok {
				continue // a member no Node names: no column to put it in
			}
			rd := readingOf(x)
			if x.Signal == decide.SignalConnect {
				r.Cells[i].Connect = rd
			} else {
				r.Cells[i].RTT = rd
			}
			if rd.Measured {
				readings++
			}
		}
		if readings == 0 && row.Verdict == decide.Unknown && row.Deciding != nil {
			r.Note = decide.Summary(*row.Deciding)
		}
		m.Rows = append(m.Rows, r)
	}
	return m
}

func readingOf(x decide.Reason) Reading {
	switch {
	case x.Value != nil:
		rd := Reading{Measured: true, Value: *x.Value, OK: x.OK}
		if !x.OK {
			rd.Detail = x.Detail
		}
		return rd
	case !x.OK:
		// A failed reason with no number: the tail of the connects failed.
		return Reading{Measured: true, Failed: true, Detail: x.Detail}
	}
	return Reading{} // no connect in the window: reported, not held
}
