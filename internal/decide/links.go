package decide

import (
	"cmp"
	"slices"

	"github.com/fleet-role/fleet-role/internal/status"
)

// linkEnd is what one host measured of its path to another over its window:
// the tail of its TCP connects to the other's peer port (every recording
// host connects to every voter and learner) and its etcd's round trip to
// the other's etcd (between two members, where etcd observed one). Each is
// the measuring host's own judgement, with its figure and outcome: value is
// the tail (a connect tail of failures is +Inf and not measured), count the
// connects or round trips it is of, failed the connects that failed, over
// the connects over the limit or failed.
type linkEnd struct {
	from, to string
	connect  *judgement // nil when from does not connect to to
	rtt      *judgement // nil when etcd observed no round trip
	// judged: from was judged on a full, fresh window, so what it measured
	// counts against to as well.
	judged bool
}

// of is the end's judgement by k (kindConnect or kindPeerRTT), or nil.
func (e *linkEnd) of(k kind) *judgement {
	if k == kindConnect {
		return e.connect
	}
	return e.rtt
}

// slow: this end measured the link over its limit by k.
func (e *linkEnd) slow(k kind) bool {
	g := e.of(k)
	return g != nil && g.out == fail
}

// slowAny: this end measured the link over its limit by either.
func (e *linkEnd) slowAny() bool { return e.slow(kindConnect) || e.slow(kindPeerRTT) }

// linkMatrix is every link the hosts of one decision measured to each
// other, by each of its ends. A link with a host that runs no probe, or a
// member no host runs, is not in it: it stays in the measuring host's own
// judgements.
type linkMatrix struct {
	// from is what each host measured, in its judgements' order.
	from map[string][]*linkEnd
	// into is what was measured of each host's links from their other ends,
	// the measuring hosts in the decision's order.
	into map[string][]*linkEnd
}

// at is what from measured of its path to to, or nil.
func (m *linkMatrix) at(from, to string) *linkEnd {
	for _, e := range m.from[from] {
		if e.to == to {
			return e
		}
	}
	return nil
}

// linksOf builds the matrix from the hosts' own judgements, which its ends
// point into: each host's must not move after.
func linksOf(hosts []*host, byName map[string]*host) *linkMatrix {
	m := &linkMatrix{from: make(map[string][]*linkEnd, len(hosts)), into: map[string][]*linkEnd{}}
	inMatrix := func(h *host, g *judgement) bool {
		return g.kind.isLink() && g.subject != h.node.Name && byName[g.subject] != nil
	}
	// One block for every end and one for the pointers to them: at most one
	// end per link judgement.
	n := 0
	for _, h := range hosts {
		for i := range h.own {
			if inMatrix(h, &h.own[i]) {
				n++
			}
		}
	}
	ends, ptrs := make([]linkEnd, 0, n), make([]*linkEnd, 0, n)
	for _, h := range hosts {
		name, first := h.node.Name, len(ptrs)
		for i := range h.own {
			g := &h.own[i]
			if !inMatrix(h, g) {
				continue
			}
			e := m.at(name, g.subject)
			if e == nil {
				ends = append(ends, linkEnd{from: name, to: g.subject, judged: h.judged})
				e = &ends[len(ends)-1]
				ptrs = append(ptrs, e)
				m.from[name] = ptrs[first:len(ptrs):len(ptrs)]
				into := m.into[g.subject]
				if into == nil {
					// Every host may measure a voter: room for all.
					into = make([]*linkEnd, 0, len(hosts))
				}
				m.into[g.subject] = append(into, e)
			}
			if g.kind == kindConnect {
				e.connect = g
			} else {
				e.rtt = g
			}
		}
	}
	return m
}

// otherEnds is what the hosts at the other ends of y's links measured that
// counts against y (docs/limits.md, "Links, swaps and gates"), one
// judgement per such host: a link that a judged host measured slow and y
// did not itself measure slow, by connect where that is slow, else by
// etcd's round trip. Between two hosts that vote, or to a host that does
// not, it fails on y too: either end may be the one on the poor path, and
// the count of slow links tells them apart. From a host that does not vote
// to one that does, it is named on y but held only against the measuring
// host: a voter is judged by the paths the quorum uses, and a poor path
// from one standby must not make a healthy voter the one to swap out (for
// that very standby, which would then be judged without it).
func (m *linkMatrix) otherEnds(y *host, byName map[string]*host) []judgement {
	var out []judgement
	for _, e := range m.into[y.node.Name] {
		if !e.judged {
			continue
		}
		var src *judgement
		switch {
		case e.slow(kindConnect):
			src = e.connect
		case e.slow(kindPeerRTT):
			src = e.rtt
		default:
			continue
		}
		if back := m.at(y.node.Name, e.from); back != nil && back.slowAny() {
			continue // y names the link itself
		}
		g := *src
		g.subject, g.from = e.from, src
		if !votes(byName[e.from]) && votes(y) {
			g.out, g.held = pass, true
		}
		out = append(out, g)
	}
	return out
}

// judgements sets the host's judgements: its own, and those measured from
// the other ends of its links, in reason order.
func (h *host) judgements(m *linkMatrix, byName map[string]*host) {
	in := m.otherEnds(h, byName)
	if len(in) == 0 {
		h.all = h.own
		return
	}
	h.all = slices.Concat(h.own, in)
	sortJudgements(h.all)
}

// sortJudgements puts judgements in reason order: by kind, then subject;
// a host's own before the same link measured from its other end.
func sortJudgements(gs []judgement) {
	slices.SortStableFunc(gs, func(a, b judgement) int {
		return cmp.Or(cmp.Compare(a.kind, b.kind), cmp.Compare(a.subject, b.subject))
	})
}

// published is the matrix as the status publishes it (Status.Links): a row
// per host that measured any link, in the order of hosts, its cells by
// peer. Every row, cell, reading and figure is carved from one block each,
// as the judgements are: a large fleet has thousands of links.
func (m *linkMatrix) published(hosts []*host) []status.LinkRow {
	rows, n := 0, 0
	for _, h := range hosts {
		if ends := m.from[h.node.Name]; len(ends) > 0 {
			rows++
			n += len(ends)
		}
	}
	out := make([]status.LinkRow, 0, rows)
	cells := make([]status.LinkCell, 0, n)
	readings := make([]status.LinkReading, 0, 2*n)
	seconds := make([]float64, 0, 2*n)
	reading := func(g *judgement) *status.LinkReading {
		if g == nil {
			return nil
		}
		r := status.LinkReading{Count: g.count, Over: g.over, Failed: g.failed, OK: g.out == pass}
		if g.measured {
			seconds = append(seconds, g.value)
			r.Seconds = &seconds[len(seconds)-1]
		}
		if g.unmerged != nil {
			r.Unmerged = g.unmerged.count
		}
		readings = append(readings, r)
		return &readings[len(readings)-1]
	}
	for _, h := range hosts {
		ends := m.from[h.node.Name]
		if len(ends) == 0 {
			continue
		}
		first := len(cells)
		for _, e := range ends {
			cells = append(cells, status.LinkCell{Peer: e.to, Connect: reading(e.connect), RTT: reading(e.rtt), Slow: e.slowAny()})
		}
		row := cells[first:len(cells):len(cells)]
		slices.SortFunc(row, func(a, b status.LinkCell) int { return cmp.Compare(a.Peer, b.Peer) })
		out = append(out, status.LinkRow{From: h.node.Name, To: row})
	}
	return out
}
