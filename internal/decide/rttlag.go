package decide

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"
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
// voters are etcd's round trips alone while the connects were slow at a
// decision less than rttLag ago (connectsSlowAt, from the memory): those
// round trips may be the connects' fault still carried by etcd's smoothed
// average, on whichever links its last observations fell, and would name a
// voter the connects never did. They are then held against no voter: the
// voters are judged by their own readings alone, as with no slow link. ok
// is false when the round trips may stand.
func rttLagging(now, connectsSlowAt time.Time, rttLinks map[link]bool) (Reason, bool) {
	if len(rttLinks) == 0 || connectsSlowAt.IsZero() {
		return Reason{}, false
	}
	ago := now.Sub(connectsSlowAt)
	if ago >= rttLag || ago < 0 {
		return Reason{}, false
	}
	head := "slow links between voters by peer_rtt only: " + joinLinks(sortedLinks(rttLinks)) + "; but the connects between voters were slow "
	age := ago.Round(time.Millisecond).String() + " ago, "
	r := step(StepAttribution, "", attributionBasis, true, head+age+fmt.Sprintf(
		"at %s, under %v: etcd's round trip is a smoothed average of probes every %v (weight %g on the newest), observed every %v, and may carry a delay the connects no longer show for %v after: until then the round trips are held against no voter, and a voter is unfit by its own readings only",
		connectsSlowAt.UTC().Format(time.RFC3339), rttLag, probeInterval, srttWeight, rttObserveInterval, rttLag))
	// Its detail states an age: the fingerprint compares when the connects
	// were last slow (in the memory).
	r.age = spanOf(len(head), age)
	return r, true
}

// sortedLinks is the set's links in name order.
func sortedLinks(set map[link]bool) []link {
	return slices.SortedFunc(maps.Keys(set), func(a, b link) int { return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1])) })
}
