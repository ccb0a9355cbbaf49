package decide

import (
	"cmp"
	"fmt"
	"maps"
	"math/bits"
	"slices"
	"strings"

	"github.com/fleet-role/fleet-role/internal/quantile"
	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/status"
)

// maxMembers is etcd's largest cluster (docs/facts.md, "etcd memory and
// size": no more than 7 members); it bounds the brute-force search for the smallest cover at 2^7
// sets of voters.
const maxMembers = 7

const attributionBasis = "slow links no single host explains are a fault of the network or of the whole machine, not of a host (TiKV PD acts only when one store is slow). The slow links are those either end measured over the limit by connect, which times the path alone; by etcd's peer round trip only when no connect between voters is slow, since etcd's round trip also times both members' etcd (a slow leader raised it between two healthy followers past the limit, their connects fit: docs/limits.md). Among the voters, the smallest sets of voters that touch every slow link (each a minimum vertex cover) explain them only when they are a minority of the voters and some link between two voters outside the set is measured fit, no more of the connects from both its ends together over the limit than the tail forgives one window (the network itself is sound); the voters of every such set are the ones that may be replaced"

// link is a path between two voters, its ends in name order.
type link [2]string

func (l link) String() string { return l[0] + "-" + l[1] }

// attribute is the attribution rule over the slow links between voters. It
// returns its reason (not ok: no host explains them, nothing is swapped),
// the voters of the smallest sets that explain them, and whether any link
// between voters is slow.
func attribute(s settings.Settings, voters []*host, links *linkMatrix) (r status.Reason, suspects []*host, slow bool) {
	var vnames []string
	for _, v := range voters {
		vnames = append(vnames, v.node.Name)
	}
	k := attributedBy(voters, links)
	set, by := slowVoterLinks(voters, links, k), signalOf[k]
	if len(set) == 0 {
		return step(status.CodeNoSlowVoterLinks, "", attributionBasis, true, "no link between voters is slow: a voter is unfit by its own readings only"), nil, false
	}
	slowLinks := slices.SortedFunc(maps.Keys(set), func(a, b link) int { return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1])) })
	n := len(vnames)
	minority := (n - 1) / 2
	listed := "by " + by + ": " + joinLinks(slowLinks)
	if by == status.SignalPeerRTT {
		listed = "by peer_rtt (no connect between voters is slow): " + joinLinks(slowLinks)
	}
	if n > maxMembers {
		r := step(status.CodeTooManyVoters, "", attributionBasis, false,
			fmt.Sprintf("slow links between voters %s; %d voters, more than etcd's %d members: not attributed, nothing is swapped", listed, n, maxMembers))
		return r, nil, true
	}
	size, covers := minCovers(vnames, slowLinks)
	r = step(status.CodeNoMinorityCover, "", attributionBasis, false, "")
	r.Value, r.Limit, r.Unit, r.Rule = num(float64(size)), num(float64(minority)), "hosts", settings.AtMost
	if size > minority {
		r.Detail = fmt.Sprintf("slow links between voters %s; the smallest set of voters that touches every one has %d of the %d voters (%s), not a minority: no host explains them, the fault is the network's or the whole machine's: nothing is swapped",
			listed, size, n, joinSets(covers))
		return r, nil, true
	}
	var explain []string
	var unsound []string
	blamed := map[string]bool{}
	for _, c := range covers {
		fit, ok := fitOutside(s, voters, c, links)
		if !ok {
			unsound = append(unsound, "{"+strings.Join(c, ", ")+"}")
			continue
		}
		explain = append(explain, fmt.Sprintf("{%s}, with %s outside it", strings.Join(c, ", "), fit))
		for _, x := range c {
			blamed[x] = true
		}
	}
	if len(explain) == 0 {
		r.Code = status.CodeNetworkUnsound
		r.Detail = fmt.Sprintf("slow links between voters %s; the smallest sets of voters that touch every one (%s, %d of the %d voters) are a minority, but outside each no link between voters is measured fit from both ends together, so nothing shows the network itself is sound: no host explains them: nothing is swapped",
			listed, strings.Join(unsound, "; "), size, n)
		return r, nil, true
	}
	for _, v := range voters {
		if blamed[v.node.Name] {
			suspects = append(suspects, v)
		}
	}
	r.OK, r.Code = true, status.CodeSlowLinksExplained
	r.Detail = fmt.Sprintf("slow links between voters %s; the smallest sets of voters that touch every one have %d of the %d voters, a minority: %s",
		listed, size, n, strings.Join(explain, "; "))
	if len(unsound) > 0 {
		r.Detail += fmt.Sprintf("; not %s, outside which no link is measured fit", strings.Join(unsound, "; "))
	}
	r.Detail += "; they explain the slow links: " + names(suspects)
	return r, suspects, true
}

// attributedBy is the signal the attribution reads the slow links between
// voters by: the connects where any is slow, etcd's own round trips only
// where none is (attributionBasis).
func attributedBy(voters []*host, links *linkMatrix) kind {
	if len(slowVoterLinks(voters, links, kindConnect)) > 0 {
		return kindConnect
	}
	return kindPeerRTT
}

// slowVoterLinks is the links between voters that either end measured over
// its limit by k.
func slowVoterLinks(voters []*host, links *linkMatrix, k kind) map[link]bool {
	isVoter := map[string]bool{}
	for _, v := range voters {
		isVoter[v.node.Name] = true
	}
	set := map[link]bool{}
	for _, v := range voters {
		for _, e := range links.from[v.node.Name] {
			if isVoter[e.to] && e.slow(k) {
				set[linkOf(v.node.Name, e.to)] = true
			}
		}
	}
	return set
}

func linkOf(a, b string) link {
	if a > b {
		a, b = b, a
	}
	return link{a, b}
}

func joinLinks(ls []link) string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = l.String()
	}
	return strings.Join(out, ", ")
}

func joinSets(sets [][]string) string {
	out := make([]string, len(sets))
	for i, c := range sets {
		out[i] = "{" + strings.Join(c, ", ") + "}"
	}
	return strings.Join(out, "; ")
}

// minCovers returns the size of the smallest sets of names that touch every
// link (minimum vertex covers) and every such set, each in name order, the
// sets in the order of their members' positions in names. Exact by brute
// force: names holds at most maxMembers.
func minCovers(names []string, links []link) (size int, covers [][]string) {
	idx := map[string]int{}
	for i, n := range names {
		idx[n] = i
	}
	size = len(names) + 1
	var masks []uint
	for m := uint(0); m < 1<<len(names); m++ {
		k := bits.OnesCount(m)
		if k > size {
			continue
		}
		covered := true
		for _, l := range links {
			if m&(1<<idx[l[0]]) == 0 && m&(1<<idx[l[1]]) == 0 {
				covered = false
				break
			}
		}
		if !covered {
			continue
		}
		if k < size {
			size, masks = k, nil
		}
		masks = append(masks, m)
	}
	// Sets of one size in lexicographic order of their members.
	for _, m := range masks {
		var c []string
		for i, n := range names {
			if m&(1<<i) != 0 {
				c = append(c, n)
			}
		}
		covers = append(covers, c)
	}
	slices.SortFunc(covers, func(a, b []string) int { return slices.Compare(a, b) })
	return size, covers
}

// fitOutside finds a link between two voters outside cover that is measured
// fit, the evidence that the network itself is sound: the connects its two
// ends measured of each other, taken together, hold no more samples over the
// connect limit (or failed) than the tail rule forgives one window
// (window - ceil(p*window)). Taken together, because a stall of the whole
// machine that put the one sample the tail forgives in each end's window
// (and one more in the blamed host's) puts two in the link's.
func fitOutside(s settings.Settings, voters []*host, cover []string, links *linkMatrix) (string, bool) {
	forgiven := s.Window - quantile.Rank(s.TailPercentile, s.Window)
	l := s.ConnectLimit()
	count := func(from, to *host) (slow, measured int) {
		e := links.at(from.node.Name, to.node.Name)
		if e == nil || e.connect == nil {
			return 0, 0
		}
		return e.connect.over, e.connect.count
	}
	for i, a := range voters {
		if slices.Contains(cover, a.node.Name) {
			continue
		}
		for _, b := range voters[i+1:] {
			if slices.Contains(cover, b.node.Name) {
				continue
			}
			s1, m1 := count(a, b)
			s2, m2 := count(b, a)
			if m1+m2 > 0 && s1+s2 <= forgiven {
				return fmt.Sprintf("%s measured fit (%d of its %d connects from both ends over %s, the tail forgives %d)",
					linkOf(a.node.Name, b.node.Name), s1+s2, m1+m2, status.FormatValue(l.Value, l.Unit), forgiven), true
			}
		}
	}
	return "", false
}
