package decide

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/status"
)

const replaceBasis = "with slow links between voters the attribution rule names the voters that explain them; of those that records besides any single other host's implicate (their own record, or the records of two other voting hosts), the one on the most slow links, counted by the signal the attribution read them by, is replaced (ties: the one that alone measured more of them slow by it, where the other end measured them fit; then an unpinned voter, which takes the same links out; then one unfit by a reading of its own, whose slowness explains its links; then the one the last decision named; then the worst margin over its limits; then etcd's leader, on every write's path; then the Node created last, then the lower UID, which no record sets; never the name: still tied, nothing is swapped); a pinned one so chosen keeps its place and nothing is swapped. With no slow link, the unfit voter furthest over its limits by its own record (its worst margin, then the name) is replaced, passing over a pinned one for the next unpinned. One record speaks only for its own host: no voter is named to leave on one other host's record alone (docs/limits.md)"

// trueFirst orders the one of two for which a condition holds first.
func trueFirst(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return -1
	}
	return 1
}

// onMostSlowLinks is the voter to replace among those the attribution rule
// names: the one on the most slow links, of those that records besides any
// single other host's implicate (trust.go). A pinned voter so chosen stops
// the plan: the slow links stay with it whichever other voter goes.
func onMostSlowLinks(j *limits, voters, suspects []*host, links *linkMatrix, byName map[string]*host, prevNamed string, d *status.Decision) *host {
	type ranked struct {
		h     *host
		links []string
		alone int
		to    []string // the voters at the other end of the links it alone made slow
		own   bool     // unfit by a reading of its own, not a link
		worst float64
		// leader: its own record's latest etcd sample says it leads.
		leader bool
	}
	// Two voters on as many slow links share the poor paths that make them
	// unfit, and either taken out takes those links out: the one whose
	// measurement alone made a link slow goes first (its writer is the one
	// end every invented link has), then the unpinned one, where a margin
	// between two readings of one link would be noise naming the pinned one.
	//
	// On as many slow links and as many measured slow alone, a voter unfit
	// by a reading of its own (its disk, its memory, its timers) goes
	// first: a host that is slow itself measures its own links slow (a
	// starved probe times its connects late), so its fault explains them,
	// where the other end's only fault is to be at the end of them. Then,
	// still tied, the voter the last decision named: the two ends of one
	// slow link differ only by noise in their margins, and the name must not
	// turn from one end to the other with it (a swap withdrawn and named
	// again a cooldown later).
	//
	// Exactly tied on all of the above (both ends of the same failed
	// connects: no margin at all), etcd's leader goes first: it is on every
	// write's path, and a follower is not while a quorum without it is
	// fast, so the follower's swap would leave the slowness in place
	// (docs/limits.md, "Exact ties"). Only the leader's own record can say
	// it leads, so no other record steers this; two that both claim it are
	// not told apart by it.
	//
	// Then the Node the API server created last goes first, then the
	// lower UID: no record sets either, and a host that makes its Node
	// anew (a new UID and time) makes itself the one that goes, never
	// another.
	newestFirst := func(a, b ranked) int {
		return cmp.Or(b.h.node.Created.Compare(a.h.node.Created), cmp.Compare(a.h.node.UID, b.h.node.UID))
	}
	rank := func(a, b ranked) int {
		return cmp.Or(cmp.Compare(len(b.links), len(a.links)), cmp.Compare(b.alone, a.alone),
			trueFirst(!a.h.node.Pinned, !b.h.node.Pinned), trueFirst(a.own, b.own),
			trueFirst(a.h.node.Name == prevNamed, b.h.node.Name == prevNamed), cmp.Compare(a.worst, b.worst),
			trueFirst(a.leader, b.leader), newestFirst(a, b))
	}
	named, cleared := clearedOf(suspects, links, byName)
	if len(named) == 0 {
		d.Reasons = append(d.Reasons, step(status.CodeNoneImplicated, "", replaceBasis, false,
			fmt.Sprintf("no voter that explains the slow links (%s) is implicated by more than one other host's record or by its own%s: nothing is swapped",
				names(suspects), clearedText(cleared))))
		return nil
	}
	// The links and those measured slow alone are counted by the signal
	// the attribution read them by: a voter's link slow by etcd's round
	// trip only, while connects are slow elsewhere, is one the attribution
	// does not explain (an etcd round trip still raised by the fault
	// before, whose window has not yet passed: docs/limits.md, "The voter
	// to replace"). Counted, it turned the name from one end of a delayed
	// link to the other while the delay was on.
	by := attributedBy(voters, links)
	var rs []ranked
	for _, v := range named {
		n, to := alone(v, voters, links, by)
		own := slices.ContainsFunc(v.all, func(g judgement) bool { return g.failedOwnMeasure() })
		rs = append(rs, ranked{v, slowLinksOf(v, voters, links, by), n, to, own, minHeadroom(v.all, (*judgement).failedMeasure), v.etcd != nil && v.etcd.isLeader})
	}
	// The name orders the reasons' text only: it never chooses.
	slices.SortStableFunc(rs, func(a, b ranked) int { return cmp.Or(rank(a, b), cmp.Compare(a.h.node.Name, b.h.node.Name)) })
	leaving := rs[0]
	if len(rs) > 1 && rank(rs[0], rs[1]) == 0 {
		var tied []*host
		for _, r := range rs {
			if rank(rs[0], r) == 0 {
				tied = append(tied, r.h)
			}
		}
		r := step(status.CodeVotersTied, "", replaceBasis, false,
			fmt.Sprintf("%s are tied: as many slow links (%d), as many they alone measured slow (%d), pinned alike, alike unfit by readings of their own or not, none named by the last decision, the same worst margin (%s), etcd's leader alike, Nodes of the same creation time and UID (unknown): nothing tells them apart but their names, which decide nothing: nothing is swapped%s",
				names(tied), len(leaving.links), leaving.alone, formatMargin(leaving.worst), clearedText(cleared)))
		d.Reasons = append(d.Reasons, r)
		return nil
	}
	why := fmt.Sprintf("%s is the voter on the most slow links (%d%s) of those that explain them (%s)", leaving.h.node.Name, len(leaving.links), listIn(leaving.links), names(suspects))
	if len(rs) > 1 && len(rs[1].links) == len(leaving.links) {
		if leaving.alone > rs[1].alone {
			why += fmt.Sprintf(", and of those on as many, the one whose measurement alone made the most of them slow (%d: %s measured its link fit)", leaving.alone, strings.Join(leaving.to, ", "))
		} else if leaving.h.node.Pinned != rs[1].h.node.Pinned {
			why += ", and of those on as many, unpinned"
		} else if leaving.own != rs[1].own {
			why += ", and of those on as many, the one unfit by a reading of its own, whose slowness explains its links"
		} else if leaving.h.node.Name == prevNamed {
			why += ", and of those on as many, the one the last decision named"
		} else if leaving.worst != rs[1].worst {
			why += ", and of those on as many, the furthest over its limits"
		} else if leaving.leader != rs[1].leader {
			why += fmt.Sprintf(", and of those on as many, exactly tied with %s but etcd's leader, which is on every write's path (move its leadership first: etcdctl move-leader)", rs[1].h.node.Name)
		} else if !leaving.h.node.Created.Equal(rs[1].h.node.Created) {
			why += fmt.Sprintf(", and of those on as many, exactly tied with %s, its Node the newer (created %s)", rs[1].h.node.Name, leaving.h.node.Created.Format(time.RFC3339))
		} else {
			why += fmt.Sprintf(", and of those on as many, exactly tied with %s, its Node created at the same time and of the lower UID", rs[1].h.node.Name)
		}
	}
	r := step(status.CodeMostSlowLinks, leaving.h.node.Name, replaceBasis, true,
		fmt.Sprintf("%s; its worst reason: %s; unfit voters: %s%s", why, worstOf(j, leaving.h), names(unfitOf(voters)), clearedText(cleared)))
	r.Value, r.Unit = num(float64(len(leaving.links))), "links"
	d.Reasons = append(d.Reasons, r)
	if leaving.h.node.Pinned {
		d.Reasons = append(d.Reasons, step(status.CodePinnedOnSlowLinks, leaving.h.node.Name, pinnedBasis(j.s), false,
			fmt.Sprintf("%s is pinned and on the most slow links: nothing is swapped (no other voter is swapped in its place: it is not the one on the poor paths)", leaving.h.node.Name)))
		return nil
	}
	return leaving.h
}

func pinnedBasis(s settings.Settings) string {
	return fmt.Sprintf("a voter labelled %s=true is never swapped out. On the most slow links it keeps them whichever other voter goes, so nothing is swapped; unfit by its own readings only, it is passed over for the next unfit unpinned voter", s.PinnedLabel)
}

// worstOwnReadings is the voter to replace when no link between voters is
// slow: every unfit voter is unfit by its own readings (disk, memory, link
// class), and the one furthest over its limits goes. A pinned voter is passed
// over for the next unpinned one: its fault is its own and stays with it, and
// another voter's is another's.
func worstOwnReadings(j *limits, voters []*host, links *linkMatrix, byName map[string]*host, d *status.Decision) *host {
	unfit := unfitByOwnReadings(voters)
	if len(unfit) == 0 {
		// Unfit by links alone that another's record alone accuses (a round
		// trip to a member no record claims): say why none is named.
		if _, cleared := clearedOf(unfitOf(voters), links, byName); len(cleared) > 0 {
			d.Reasons = append(d.Reasons, step(status.CodeNoneOwnImplicated, "", replaceBasis, false,
				"no unfit voter is implicated by its own record or by more than one other host's"+clearedText(cleared)+": nothing is swapped"))
			return nil
		}
		var unknown []string
		for _, v := range voters {
			if v.verdict == status.Unknown {
				unknown = append(unknown, v.node.Name)
			}
		}
		code, why := status.CodeAllVotersFit, "every voter is fit: nothing to replace"
		switch byLinks := unfitOf(voters); {
		case len(byLinks) > 0:
			// Unfit by links the attribution held against no voter
			// (etcd's lagging round trips): not fit, and not named.
			code, why = status.CodeUnfitByLinksAlone, fmt.Sprintf("no voter is unfit by a reading of its own (%s unfit by slow links alone, held against no voter): nothing to replace", names(byLinks))
		case len(unknown) > 0:
			code, why = status.CodeVotersUnknown, fmt.Sprintf("no voter is unfit (unknown: %s): nothing to replace", strings.Join(unknown, ", "))
		}
		d.Reasons = append(d.Reasons, step(code, "", replaceBasis, false, why))
		return nil
	}
	worst := func(h *host) float64 { return minHeadroom(h.all, (*judgement).failedOwnMeasure) }
	slices.SortStableFunc(unfit, func(a, b *host) int {
		return cmp.Or(cmp.Compare(worst(a), worst(b)), cmp.Compare(a.node.Name, b.node.Name))
	})
	var passed []string
	for _, v := range unfit {
		if v.node.Pinned {
			passed = append(passed, v.node.Name)
			d.Reasons = append(d.Reasons, step(status.CodePinnedPassedOver, v.node.Name, pinnedBasis(j.s), true,
				fmt.Sprintf("%s is pinned and unfit by its own readings only (%s): passed over for the next unfit unpinned voter", v.node.Name, worstOf(j, v))))
			continue
		}
		why := fmt.Sprintf("%s is the unfit voter furthest over its limits, by its own readings (no link between voters is slow); its worst reason: %s; unfit voters: %s",
			v.node.Name, worstOf(j, v), names(unfit))
		if len(passed) > 0 {
			why = fmt.Sprintf("%s is the next unfit unpinned voter after %s; its worst reason: %s; unfit voters: %s",
				v.node.Name, strings.Join(passed, ", "), worstOf(j, v), names(unfit))
		}
		r := step(status.CodeFurthestOverLimits, v.node.Name, replaceBasis, true, why)
		r.Value, r.Unit = num(0), "links"
		d.Reasons = append(d.Reasons, r)
		return v
	}
	d.Reasons = append(d.Reasons, step(status.CodeAllUnfitPinned, "", replaceBasis, false,
		fmt.Sprintf("every unfit voter is pinned (%s): nothing is swapped", strings.Join(passed, ", "))))
	return nil
}

// unfitByOwnReadings is the voters unfit by a reading of their own, not a
// link: with no slow link between voters (or only etcd's lagging round
// trips, rttLagging) the same as the unfit ones.
func unfitByOwnReadings(voters []*host) []*host {
	var out []*host
	for _, v := range voters {
		if v.verdict == status.Unfit && slices.ContainsFunc(v.all, func(g judgement) bool { return g.failedOwnMeasure() }) {
			out = append(out, v)
		}
	}
	return out
}

func unfitOf(voters []*host) []*host {
	var out []*host
	for _, v := range voters {
		if v.verdict == status.Unfit {
			out = append(out, v)
		}
	}
	return out
}
