package decide

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/fleet-role/fleet-role/internal/status"
)

// etcd's peer round trip lags the path it times (docs/facts.md, etcd's
// rafthttp/probing_status.go and github.com/xiang90/probing's status.go):
// each member probes each peer every probeInterval (rafthttp's
// ConnReadTimeout, 5 s, less a second), keeps a smoothed round trip
// weighted srttWeight on the newest probe, and observes that smoothed value
// into etcd_network_peer_round_trip_time_seconds every rttObserveInterval
// (statusMonitoringInterval). After a path recovers, the smoothed round trip
// falls by (1 - srttWeight) a probe: from the most a connect can time, the
// election timeout (a connect taking longer fails at the probe's reading
// timeout, which is at most that), to the round-trip limit, a tenth of it,
// takes ln(10)/ln(8/7) = 17.2 probes, 18 whole ones, 72 s; observed up to
// 30 s later.
const (
	probeInterval      = 4 * time.Second
	srttWeight         = 0.125
	rttObserveInterval = 30 * time.Second
)

// rttLag is how long after the connects last showed a slow link between
// voters etcd's round trips may still report the delay they saw: 102 s.
var rttLag = func() time.Duration {
	probes := math.Ceil(math.Log(10) / -math.Log(1-srttWeight))
	return time.Duration(probes)*probeInterval + rttObserveInterval
}()

// rttLagging returns the attribution's reason when the slow links between
// voters are etcd's round trips alone while, at a decision less than rttLag
// ago (in the memory), the connects between voters were slow or a voter ran
// late enough for its peers' round trips to carry it (lateMember): those
// round trips may be that fault still carried by etcd's smoothed average,
// on whichever links its last observations fell, and would name a voter no
// current reading does. A member stopped or starved answers its peers'
// probes late while the kernel still accepts connections for it, so the
// connects stay fast and only its own timer saw it (the probe runs on the
// same host; in the lab, in the same stop or cgroup). The round trips are
// then held against no voter: the voters are judged by their own readings
// alone, as with no slow link. ok is false when the round trips may stand.
func rttLagging(now time.Time, mem status.Memory, rttLinks map[link]bool) (status.Reason, bool) {
	if len(rttLinks) == 0 {
		return status.Reason{}, false
	}
	within := func(at time.Time) bool {
		ago := now.Sub(at)
		return !at.IsZero() && ago >= 0 && ago < rttLag
	}
	// The later of the two causes, when both are within the lag: the
	// reason states one age, and the later holds longer.
	at, what := mem.ConnectsSlowAt, "the connects between voters were slow "
	if within(mem.MemberLateAt) && (!within(at) || mem.MemberLateAt.After(at)) {
		at, what = mem.MemberLateAt, mem.MemberLate+" ran late enough for its peers' round trips to carry it (a member run late answers their probes as late; the connects, answered by the kernel, do not show it) "
	}
	if !within(at) {
		return status.Reason{}, false
	}
	ago := now.Sub(at)
	r := step(status.CodeRoundTripsLagging, "", attributionBasis, true, "slow links between voters by peer_rtt only: "+joinLinks(sortedLinks(rttLinks))+"; but "+what+ago.Round(time.Millisecond).String()+" ago, "+fmt.Sprintf(
		"at %s, under %v: etcd's round trip is a smoothed average of probes every %v (weight %g on the newest), observed every %v, and may carry a delay no reading shows any more for %v after: until then the round trips are held against no voter, and a voter is unfit by its own readings only",
		at.UTC().Format(time.RFC3339), rttLag, probeInterval, srttWeight, rttObserveInterval, rttLag))
	// Its detail states an age: the fingerprint compares when the cause
	// was last seen (in the memory).
	r.Since = at
	return r, true
}

// lateMember is the first voter, by name, that ran late enough for etcd's
// round trips to it to carry it, or "" when none did: one whose window
// holds a wake-up at least lateCarried (one stall, which its tail forgives,
// that one probe answered that late lifts the smoothed round trip past the
// limit by itself), or one unfit by wakeup_late (late at every turn, which
// lifts the smoothed value as far, probe after probe). A wake-up late past
// the wakeup_late limit once, on a busy machine, carries nothing: it would
// hold the round trips all the time.
func lateMember(j *limits, voters []*host) string {
	carried := lateCarried(j)
	names := make([]string, 0, len(voters))
	for _, v := range voters {
		if v.lateBy(carried) {
			names = append(names, v.node.Name)
		}
	}
	if len(names) == 0 {
		return ""
	}
	return slices.Min(names)
}

// lateCarried is the wake-up lateness that, as one probe answered that
// late, lifts etcd's smoothed round trip past the round-trip limit by
// itself: the limit over srttWeight (4 s at k3s's timing, 800 ms at
// etcd's).
func lateCarried(j *limits) float64 { return j.rtt.Value / srttWeight }

// lateBy reports whether the host's window holds a wake-up at least
// carried seconds late, or the host is unfit by wakeup_late.
func (h *host) lateBy(carried float64) bool {
	for i := range h.all {
		if g := &h.all[i]; g.kind == kindWakeup && g.failedMeasure() {
			return true
		}
	}
	return h.lateMost >= carried
}

// sortedLinks is the set's links in name order.
func sortedLinks(set map[link]bool) []link {
	return slices.SortedFunc(maps.Keys(set), func(a, b link) int { return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1])) })
}
