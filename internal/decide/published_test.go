package decide_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fleet-role/fleet-role/internal/status"
)

// wantTypedAsWords holds what the status publishes from the decision's
// typed state (the link matrix, each host's deciding index, the decision's
// deciding step) to what its reasons say in words, so that a reader of
// either reads the same decision:
//
//   - every cell of links is the measuring host's own connect and peer_rtt
//     reasons about that peer (not a copy from the other end): the same
//     tail, ok, count and failures; slow when either is over its limit;
//     and every such reason about a host of the status has its cell;
//   - each host's deciding index names the reason the rule over the
//     reasons picks (DecidingReason on a host without the index);
//   - the decision's deciding step is the replace step naming the voter
//     out of a swap, else the first step that holds the swap back.
func wantTypedAsWords(t *testing.T, st status.Status) {
	t.Helper()
	hosts := map[string]*status.Host{}
	for i := range st.Hosts {
		hosts[st.Hosts[i].Name] = &st.Hosts[i]
	}
	if st.Links == nil {
		t.Fatal("no links in the status")
	}
	type key struct{ from, to, signal string }
	own := map[key]status.Reason{}
	for _, h := range st.Hosts {
		for _, r := range h.Reasons {
			if (r.Signal == status.SignalConnect || r.Signal == status.SignalPeerRTT) && hosts[r.Subject] != nil &&
				r.Subject != h.Name && !strings.HasPrefix(r.Detail, "measured by ") {
				own[key{h.Name, r.Subject, r.Signal}] = r
			}
		}
	}
	cells := 0
	for _, row := range st.Links {
		if hosts[row.From] == nil {
			t.Errorf("links: a row from %q, no host of the status", row.From)
		}
		for _, c := range row.To {
			cells++
			where := row.From + " to " + c.Peer
			slow := false
			for signal, x := range map[string]*status.LinkReading{status.SignalConnect: c.Connect, status.SignalPeerRTT: c.RTT} {
				r, ok := own[key{row.From, c.Peer, signal}]
				if (x != nil) != ok {
					t.Errorf("%s: %s cell %v, reason %v", where, signal, x != nil, ok)
					continue
				}
				if x == nil {
					continue
				}
				if fmt.Sprint(deref(x.Seconds)) != fmt.Sprint(deref(r.Value)) || x.OK != r.OK {
					t.Errorf("%s: %s cell %v ok=%v, the reason %v ok=%v", where, signal, deref(x.Seconds), x.OK, deref(r.Value), r.OK)
				}
				unit := "connects"
				if signal == status.SignalPeerRTT {
					unit = "round trips"
				}
				if x.Count > 0 && !strings.Contains(r.Detail, fmt.Sprintf(" of %d %s", x.Count, unit)) {
					t.Errorf("%s: %s count %d, the reason says %q", where, signal, x.Count, r.Detail)
				}
				if x.Failed > 0 && !strings.Contains(r.Detail, fmt.Sprintf("%d of %d failed", x.Failed, x.Count)) {
					t.Errorf("%s: %s failed %d, the reason says %q", where, signal, x.Failed, r.Detail)
				}
				if x.Over < x.Failed || x.Over > x.Count {
					t.Errorf("%s: %d over of %d, %d failed", where, x.Over, x.Count, x.Failed)
				}
				slow = slow || !x.OK && x.Unmerged == 0
			}
			if c.Slow != slow {
				t.Errorf("%s: slow %v, its readings %+v %+v", where, c.Slow, c.Connect, c.RTT)
			}
		}
	}
	links := map[key]bool{}
	for k := range own {
		links[key{k.from, k.to, ""}] = true
	}
	if cells != len(links) {
		t.Errorf("links has %d cells, the hosts' own link reasons name %d links", cells, len(links))
	}

	// Every reason carries its code: a plan's of its own step, a host's
	// none of the plan's.
	for _, h := range st.Hosts {
		for _, r := range h.Reasons {
			if r.Code == "" || status.SignalOfCode(r.Code) != "" {
				t.Errorf("%s: reason %s %s has code %q, want a host's", h.Name, r.Signal, r.Subject, r.Code)
			}
		}
	}
	for _, r := range st.Decision.Reasons {
		if status.SignalOfCode(r.Code) != r.Signal {
			t.Errorf("decision reason %s %s has code %q, of step %q", r.Signal, r.Subject, r.Code, status.SignalOfCode(r.Code))
		}
	}

	for _, h := range st.Hosts {
		got, ok := status.DecidingReason(h)
		if h.Verdict == status.Unknown {
			// The words do not say which failed reason makes a host unknown
			// rather than unfit: the first of those that may.
			if !ok || got.OK || !mayBeUnknown(got) {
				t.Errorf("%s unknown: deciding %v %+v", h.Name, ok, got)
			}
			for _, r := range h.Reasons[:*h.Deciding] {
				if !r.OK && mayBeUnknown(r) {
					t.Errorf("%s unknown: deciding %s, but %s comes first", h.Name, got.Signal, r.Signal)
				}
			}
			continue
		}
		bare := h
		bare.Deciding = nil
		want, wok := status.DecidingReason(bare)
		if ok != wok || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: deciding %v %+v, the rule over its reasons picks %v %+v", h.Name, ok, got, wok, want)
		}
	}

	d := st.Decision
	r, ok := d.DecidingStep()
	switch {
	case d.Action == status.ActionSwap:
		if !ok || r.Signal != status.StepReplace || r.Subject != d.Out {
			t.Errorf("swap %s out: deciding step %v %+v, want the replace step", d.Out, ok, r)
		}
	case !ok:
		t.Errorf("no swap and no deciding step: %+v", d.Reasons)
	default:
		for _, x := range d.Reasons[:*d.Deciding] {
			if !x.OK && (x.Signal != status.StepCandidate || x.Subject == "") {
				t.Errorf("deciding step %s, but %s holds the swap before it", r.Signal, x.Signal)
			}
		}
		if r.OK || r.Signal == status.StepCandidate && r.Subject != "" {
			t.Errorf("deciding step %+v holds nothing", r)
		}
	}
}

// mayBeUnknown: a failed reason of this kind may be one that makes its host
// unknown (docs/status.md, "Reasons").
func mayBeUnknown(r status.Reason) bool {
	switch r.Signal {
	case status.SignalEntry, status.SignalRecord, status.SignalSamples, status.SignalFreshness, status.SignalEtcd:
		return true
	case status.SignalFdatasync:
		return r.Value == nil
	case status.SignalMemory:
		return r.Value == nil
	case status.SignalPeerRTT, status.SignalWALFsync, status.SignalBackendCommit:
		return strings.Contains(r.Detail, "could not be merged")
	}
	return false
}
