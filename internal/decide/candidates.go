package decide

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
)

const candBasis = "a standby is judged against the voters that would remain: its slow links to the voter leaving, and to any other voter that explains the slow links between voters, do not count (it measures a slow voter slow too); among fit standbys the largest headroom (its tightest signal, as a fraction of the limit) wins"

// candidates judges every standby as the replacement of out, adding a
// reason for each and, when none is fit, one that says so; it returns the
// fit standby with the largest headroom, or "".
// explained names the other voters that explain the slow links between
// voters (the attribution's suspects): a standby's slow link to one of them
// is that voter's, as its link to the voter leaving is.
func candidates(j *limits, voters, standbys []*host, out string, explained []*host, links *linkMatrix, d *Decision) string {
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
	best, bestMargin := "", math.Inf(-1)
	cands := make([]Reason, 0, len(standbys)+1)
	for _, c := range standbys {
		r, margin := candidate(j, c, out, others, remaining, links)
		cands = append(cands, r)
		if r.OK && (best == "" || margin > bestMargin) {
			best, bestMargin = c.node.Name, margin
		}
	}
	if best == "" {
		why := "no standby to replace " + out + " with"
		if len(standbys) > 0 {
			why = fmt.Sprintf("no standby is fit against the voters that would remain (%s): nothing is swapped", strings.Join(remaining, ", "))
		}
		cands = append(cands, step(StepCandidate, "", candBasis, false, why))
	}
	d.Reasons = append(d.Reasons, cands...)
	return best
}

// candidate judges standby c against the voters that would remain when out
// leaves: its reason, whose value is c's headroom when it is fit, and that
// headroom.
func candidate(j *limits, c *host, out string, explained map[string]bool, remaining []string, links *linkMatrix) (Reason, float64) {
	name := c.node.Name
	r := step(StepCandidate, name, candBasis, false, "")
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
			return quoting(r, name+" is unknown: ", g.reason(j, name)), math.Inf(-1)
		case fail:
			bad = append(bad, Summary(g.reason(j, name)))
		}
		if g.kind.isMeasure() && g.measured {
			margin = math.Min(margin, g.headroom())
		}
	}
	if len(bad) > 0 {
		r.Detail = fmt.Sprintf("%s is unfit against the voters that would remain: %s", name, strings.Join(bad, "; "))
		return r, math.Inf(-1)
	}
	for _, v := range remaining {
		if e := links.at(name, v); e == nil || e.connect == nil || !e.connect.measured {
			r.Detail = fmt.Sprintf("%s has no connect measured to %s, a voter that would remain", name, v)
			return r, math.Inf(-1)
		}
	}
	r.OK = true
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
	return r, margin
}
