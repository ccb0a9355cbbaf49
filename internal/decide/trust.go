package decide

import (
	"fmt"
	"slices"
	"strings"

	"github.com/fleet-role/fleet-role/internal/entry"
	"github.com/fleet-role/fleet-role/internal/status"
)

// One record speaks only for its own host (docs/limits.md, "One record
// speaks only for its own host"). A probe writes its own record and no
// other (the admission policy holds it to that), but what the record holds
// is the probe's word alone: a compromised host may write anything into its
// own record. Whatever it writes, it may change its own verdict, the
// verdicts of the links it measures and whether a swap happens at all, and
// it may get its own host replaced; it must never get another host named to
// leave that the other hosts' records do not implicate. Two rules here hold
// that:
//
//   - a record whose etcd member ID another member's record already reports
//     is refused (claimMembers): a member ID decides whose round trips are
//     whose, and a record claiming another's ID would take them;
//   - a voter is named to leave only when records besides any single other
//     host's implicate it (implicationOf): its own record (a reading of its
//     own over a limit, or a link it measured slow itself), or the records
//     of at least two other voting hosts that measured their links to it
//     slow where it did not. One other host's word alone names nobody.

// claimMembers refuses the records of the members whose etcd member ID
// another member's record also reports. The record that held the ID at the
// previous decision (its observation's member ID) keeps it and the others
// are refused; when none held it (a first decision, or two claims arriving
// together), every claimant is refused: which one is the member cannot be
// told from their records, and either may be the one that lies. A refused
// record's etcd readings name nothing (its role is its Node's alone) and
// its host is unknown. It returns the refusals, by host; the others' claims
// are set in their observations.
func claimMembers(hosts []*host, prev map[string]*status.Observation) map[*host]string {
	byID := map[string][]*host{}
	var ids []string
	for _, h := range hosts {
		if !h.isMember() || h.etcd == nil || h.etcd.memberID == "" {
			continue
		}
		id := h.etcd.memberID
		if byID[id] == nil {
			ids = append(ids, id)
		}
		byID[id] = append(byID[id], h)
	}
	var refused map[*host]string
	for _, id := range ids {
		claims := byID[id]
		var holder *host
		held := 0
		for _, h := range claims {
			if p := prev[h.node.Name]; p != nil && p.MemberID == id {
				holder, held = h, held+1
			}
		}
		if held != 1 {
			holder = nil // no decision gave it to two; a status that did is not followed
		}
		if len(claims) == 1 {
			holder = claims[0]
		}
		for _, h := range claims {
			if h == holder {
				if h.obs != nil {
					h.obs.MemberID = id
				}
				continue
			}
			if refused == nil {
				refused = map[*host]string{}
			}
			if holder != nil {
				refused[h] = fmt.Sprintf("its etcd member ID %s is already reported by %s's record, which held it at the previous decision", id, holder.node.Name)
			} else {
				refused[h] = fmt.Sprintf("its etcd member ID %s is also reported by %s's record, and no record held it at the previous decision", id, names(slices.DeleteFunc(slices.Clone(claims), func(o *host) bool { return o == h })))
			}
		}
	}
	for h := range refused {
		// Its claims are its own word, refused with it: the role is the
		// Node's (a learner is one by k3s's condition alone).
		h.etcd, h.merged = nil, nil
		h.role = roleOf(h.node, nil)
	}
	return refused
}

// refuseRecord judges a host whose record claimed another member's etcd
// member ID: unknown, with why, and none of its readings judged.
func (h *host) refuseRecord(why string) {
	g := unmeasuredAs(kindRecord, vClaimed, "", nil, unknown)
	g.text = why
	h.own = append(h.own, g)
	h.samples = len(h.window)
	h.judged = false
	h.window, h.connects, h.entry, h.merged = nil, nil, entry.Entry{}, nil
}

// implication is what names a voter, by whose records.
type implication struct {
	// own: its own record implicates it: a reading of its own over its
	// limit, or a link it measured slow that the other end measured slow
	// too, or measured fit by the same signal (the two ends disagree, and
	// the one that measured it slow is the odd one: a host slow to measure,
	// starved of CPU, times every connect late). A link whose other end
	// measured nothing of it by that signal (etcd feeds its round trips
	// rarely) tells neither end, and a round trip to a member no record
	// claims cannot be put on a host: a record that hides its own member
	// ID would otherwise put its slow round trips on the others.
	own bool
	// accusers are the other voting hosts, judged on a full window, that
	// measured their link to it slow where it did not measure that link
	// slow (it measured it fit, or not at all).
	accusers []string
	// unseen are the voters at the other end of links it measured slow
	// and they measured nothing of, by that signal.
	unseen []string
}

// named: the voter may be named to leave. Its own record, or two other
// voting hosts' records: then whichever single record lies, another
// implicates it.
func (im implication) named() bool { return im.own || len(im.accusers) >= 2 }

// why says, of a voter that may not be named, what its slow links rest
// on.
func (im implication) why(name string) string {
	var parts []string
	if len(im.accusers) > 0 {
		parts = append(parts, fmt.Sprintf("%s's slow links rest on %s's record alone: %s measured the link slow and %s did not", name, im.accusers[0], im.accusers[0], name))
	}
	if len(im.unseen) > 0 {
		parts = append(parts, fmt.Sprintf("%s measured its link to %s slow and %s measured nothing of it: which end is slow cannot be told", name, strings.Join(im.unseen, ", "), strings.Join(im.unseen, ", ")))
	}
	if len(parts) == 0 {
		return name + " is unfit only by round trips to etcd members that no record claims, whose hosts cannot be told"
	}
	return strings.Join(parts, "; ")
}

// measuredFit: this end measured the link within its limit by k.
func (e *linkEnd) measuredFit(k kind) bool {
	g := e.of(k)
	return e.judged && g != nil && g.measured && g.out == pass
}

// odd says how v's slow end e of a link stands against the other end's
// measurement back of the same link: slow at both ends, or measured fit
// there by the signal v measured it slow by (v's end is the odd one); else
// the other end measured nothing of it (unseen).
func odd(e, back *linkEnd) (both, alone bool) {
	if back == nil || !back.judged {
		return false, false
	}
	if back.slowAny() {
		return true, false
	}
	for _, k := range []kind{kindConnect, kindPeerRTT} {
		if e.slow(k) && back.measuredFit(k) {
			return false, true
		}
	}
	return false, false
}

func implicationOf(v *host, m *linkMatrix, byName map[string]*host) implication {
	var im implication
	for i := range v.own {
		g := &v.own[i]
		if g.failedMeasure() && !g.kind.isLink() {
			im.own = true
			break
		}
	}
	for _, e := range m.from[v.node.Name] {
		if !e.slowAny() || byName[e.to] == nil {
			continue
		}
		both, alone := odd(e, m.at(e.to, v.node.Name))
		switch {
		case both || alone:
			im.own = true
		default:
			im.unseen = append(im.unseen, e.to)
		}
	}
	for _, e := range m.into[v.node.Name] {
		if !e.judged || !e.slowAny() || !votes(byName[e.from]) {
			continue
		}
		if back := m.at(v.node.Name, e.from); back != nil && back.slowAny() {
			continue // it measured the link slow itself: its own record
		}
		im.accusers = append(im.accusers, e.from)
	}
	return im
}

// alone counts the links v alone made slow by k, the signal the
// attribution read them by: those it measured slow by k and whose other
// end, a voter, measured slow by neither signal and fit by k. Every slow
// link a record can invent has its writer at one end and the other end
// measuring it fit: the tie-break goes against such a writer. A link slow
// by the other signal only is not one the attribution explains (an etcd
// round trip still raised by a fault that is over, while the connects
// show the one at hand), and it does not count.
func alone(v *host, voters []*host, m *linkMatrix, k kind) (n int, to []string) {
	for _, o := range voters {
		if o == v {
			continue
		}
		e := m.at(v.node.Name, o.node.Name)
		if e == nil || !e.slow(k) {
			continue
		}
		if back := m.at(o.node.Name, v.node.Name); back != nil && back.judged && !back.slowAny() && back.measuredFit(k) {
			n++
			to = append(to, o.node.Name)
		}
	}
	return n, to
}

// slowLinksOf is the voters at the other ends of v's links that either end
// measured slow by k, the signal the attribution read them by: the slow
// links v explains.
func slowLinksOf(v *host, voters []*host, m *linkMatrix, k kind) []string {
	var to []string
	for _, o := range voters {
		if o == v {
			continue
		}
		if e, back := m.at(v.node.Name, o.node.Name), m.at(o.node.Name, v.node.Name); e != nil && e.slow(k) || back != nil && back.judged && back.slow(k) {
			to = append(to, o.node.Name)
		}
	}
	slices.Sort(to)
	return to
}

// clearedOf splits hosts into those that may be named to leave and the
// reasons the others may not.
func clearedOf(hosts []*host, m *linkMatrix, byName map[string]*host) (named []*host, cleared []string) {
	for _, h := range hosts {
		if im := implicationOf(h, m, byName); im.named() {
			named = append(named, h)
		} else {
			cleared = append(cleared, im.why(h.node.Name))
		}
	}
	return named, cleared
}

// clearedText is what the replace step says of the voters not named.
func clearedText(cleared []string) string {
	if len(cleared) == 0 {
		return ""
	}
	return "; not named, since one record speaks only for its own host: " + strings.Join(cleared, "; ")
}
