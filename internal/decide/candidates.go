package decide

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/fleet-role/fleet-role/internal/status"
)

const candBasis = "a standby is judged against the voters that would remain: its slow links to the voter leaving, and to any other voter that explains the slow links between voters, do not count (it measures a slow voter slow too); a fit standby slow to no voter that would remain comes first, and only when there is none may one whose slow links are all to such voters come in, the slow links the new voter set keeps said beside it; among those the largest headroom (its tightest signal, as a fraction of the limit) wins (docs/limits.md, \"The standby that comes in\")"

// candidates judges every standby as the replacement of out, adding a
// reason for each and, when none is fit, one that says so; it returns the
// fit standby slow to no voter that would remain with the largest
// headroom, else the fit one with the largest headroom, or "".
// explained names the other voters that explain the slow links between
// voters (the attribution's suspects): a standby's slow link to one of them
// is that voter's, as its link to the voter leaving is.
func candidates(j *limits, voters, standbys []*host, out string, explained []*host, links *linkMatrix, d *status.Decision) string {
	others := map[string]bool{}
	for _, v := range explained {
		if v.node.Name != out {
			others[v.node.Name] = true
		}
	}
	var remaining []string
	for _, v := range voters {
		if v.node.Name != out {
			remaining = append(remaining, v.node.Name)
		}
	}
	// A standby slow to a voter that stays keeps a slow link in the new
	// voter set, however much headroom its other links have: a clean one
	// comes first, whatever its headroom.
	best, bestMargin, bestSlow := -1, math.Inf(-1), []string(nil)
	cands := make([]status.Reason, 0, len(standbys)+1)
	slow := make([]bool, 0, len(standbys))
	for _, c := range standbys {
		r, margin, slowTo := candidate(j, c, out, others, remaining, links)
		cands, slow = append(cands, r), append(slow, len(slowTo) > 0)
		if !r.OK {
			continue
		}
		if best < 0 || cmp.Or(trueFirst(len(slowTo) == 0, len(bestSlow) == 0), cmp.Compare(bestMargin, margin)) < 0 {
			best, bestMargin, bestSlow = len(cands)-1, margin, slowTo
		}
	}
	if best >= 0 {
		cands[best].Code = status.CodeCandidateChosen
	}
	if best >= 0 && len(bestSlow) > 0 {
		// No standby is clean: say what the new voter set keeps slow.
		r := &cands[best]
		r.Detail += "; no fit standby is slow to no voter that would remain, so " + r.Subject + " comes in, and the voter set after the swap keeps the slow links " + strings.Join(keptSlow(r.Subject, bestSlow, remaining, links), ", ")
	}
	if best >= 0 && len(bestSlow) == 0 {
		// A clean one comes in: each fit standby passed over for a slow
		// link says so.
		for i := range cands {
			if r := &cands[i]; r.OK && i != best && slow[i] {
				r.Detail += "; a fit standby slow to no voter that would remain comes first"
			}
		}
	}
	if best < 0 {
		code, why := status.CodeNoStandby, "no standby to replace "+out+" with"
		if len(standbys) > 0 {
			code, why = status.CodeNoFitStandby, fmt.Sprintf("no standby is fit against the voters that would remain (%s): nothing is swapped", strings.Join(remaining, ", "))
		}
		cands = append(cands, step(code, "", candBasis, false, why))
	}
	d.Reasons = append(d.Reasons, cands...)
	if best < 0 {
		return ""
	}
	return cands[best].Subject
}

// keptSlow lists the slow links the voter set after the swap keeps: in's
// links to the voters it is slow to, and the links between the voters that
// remain that either end measured slow, each as "a-b", sorted.
func keptSlow(in string, slowTo, remaining []string, links *linkMatrix) []string {
	var out []string
	for _, v := range slowTo {
		out = append(out, linkOf(in, v).String())
	}
	for i, a := range remaining {
		for _, b := range remaining[i+1:] {
			if e, f := links.at(a, b), links.at(b, a); (e != nil && e.slowAny()) || (f != nil && f.slowAny()) {
				out = append(out, linkOf(a, b).String())
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// candidate judges standby c against the voters that would remain when out
// leaves: its reason, whose value is c's headroom when it is fit, that
// headroom, and the voters that would remain that it is slow to (each one
// that explains the slow links between voters).
func candidate(j *limits, c *host, out string, explained map[string]bool, remaining []string, links *linkMatrix) (status.Reason, float64, []string) {
	name := c.node.Name
	r := step(status.CodeCandidateUnfit, name, candBasis, false, "")
	var bad []string
	margin, slowToOut := math.Inf(1), false
	slowToOthers := map[string]bool{}
	for i := range c.all {
		g := &c.all[i]
		if g.kind.isLink() && g.subject == out {
			// Its link to the voter leaving does not count.
			slowToOut = slowToOut || g.out == fail
			continue
		}
		if g.kind.isLink() && explained[g.subject] {
			// Nor its link to another voter that explains the slow links:
			// the slowness is that voter's.
			if g.out == fail {
				slowToOthers[g.subject] = true
			}
			continue
		}
		switch g.out {
		case unknown:
			r.Code = status.CodeCandidateUnknown
			return quoting(r, name+" is unknown: ", g.reason(j, name)), math.Inf(-1), nil
		case fail:
			bad = append(bad, status.Summary(g.reason(j, name)))
		}
		if g.kind.isMeasure() && g.measured {
			margin = math.Min(margin, g.headroom())
		}
	}
	if len(bad) > 0 {
		r.Detail = fmt.Sprintf("%s is unfit against the voters that would remain: %s", name, strings.Join(bad, "; "))
		return r, math.Inf(-1), nil
	}
	for _, v := range remaining {
		// A tail of failed connects is no latency, but to a voter that
		// explains the slow links it is a slow link like any other.
		if e := links.at(name, v); e == nil || e.connect == nil || !e.connect.measured && !(explained[v] && e.connect.out == fail) {
			r.Code = status.CodeCandidateUnmeasured
			r.Detail = fmt.Sprintf("%s has no connect measured to %s, a voter that would remain", name, v)
			return r, math.Inf(-1), nil
		}
	}
	r.OK, r.Code = true, status.CodeCandidateFit
	r.Detail = name + " is fit against " + strings.Join(remaining, ", ") + ", tightest headroom " + formatMargin(margin)
	if slowToOut {
		r.Detail += " (its slow link to " + out + ", the voter leaving, does not count)"
	}
	if len(slowToOthers) > 0 {
		r.Detail += " (its slow links to " + strings.Join(slices.Sorted(maps.Keys(slowToOthers)), ", ") + ", which explain the slow links between voters too, do not count)"
	}
	if !math.IsInf(margin, 0) {
		r.Value, r.Unit = num(margin), "fraction"
	}
	return r, margin, slices.Sorted(maps.Keys(slowToOthers))
}
