//go:build linux

package campaign

import (
	"context"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/fleet-role/fleet-role/lab/fault/netlab"
	"github.com/fleet-role/fleet-role/lab/kit/metricscrape"
	"github.com/fleet-role/fleet-role/lab/run/etcdproc"
)

// etcdWatchEvery is how often the campaign reads each member's own view of
// its cluster: well under a period, so that an interval of a period or more
// is seen.
const etcdWatchEvery = 500 * time.Millisecond

// Interval is a span of time, as the board writes it, and why it is one.
type Interval struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	Why  string    `json:"why,omitempty"`
}

// etcdWatch reads, from inside each voter's host (its own loopback, which
// no fault of the lab touches), whether its etcd member has a leader and is
// connected to every other member: etcd's own state, the ground truth of the
// gates (docs/limits.md: a voter without a leader, or not connected to every
// other, holds every swap). It is the campaign's, read beside the fleet's
// probes and independent of them.
type etcdWatch struct {
	mu    sync.Mutex
	spans spans
	// elections holds, by voter, when its member's
	// etcd_server_leader_changes_seen_total was seen to rise, once per
	// change (a poll that saw it rise by two holds its time twice).
	elections map[string][]time.Time
	last      map[string]float64
}

func watchEtcd(ctx context.Context, lab *netlab.Lab, voters []string) *etcdWatch {
	w := &etcdWatch{spans: newSpans(), elections: map[string][]time.Time{}, last: map[string]float64{}}
	for _, v := range voters {
		h := lab.Host(v)
		client := &http.Client{
			Timeout: etcdWatchEvery,
			Transport: &http.Transport{
				DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
					return h.Dial(ctx, network, localMetrics)
				},
				DisableKeepAlives: true,
			},
		}
		go w.watch(ctx, v, client, len(voters)-1)
	}
	return w
}

var localMetrics = "127.0.0.1:" + strconv.Itoa(etcdproc.StandardMetricsPort)

func (w *etcdWatch) watch(ctx context.Context, voter string, client *http.Client, peers int) {
	t := time.NewTicker(etcdWatchEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			w.mark(voter, time.Now(), false)
			return
		case <-t.C:
		}
		st, ok := readState(ctx, client)
		if !ok {
			continue // a stopped or starved member answers late: nothing learnt
		}
		now := time.Now()
		w.mark(voter, now, !st.led || st.connected < peers)
		w.count(voter, now, st.leaderChanges)
	}
}

// mark opens or closes the voter's interval.
func (w *etcdWatch) mark(voter string, at time.Time, held bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.spans.mark(voter, held, at, at)
}

// count takes a reading of voter's leader changes at at: each rise since
// the last reading is a change seen then. The first reading is the
// baseline (a member counts its first leader, and the campaign starts on a
// formed fleet); a reading below the last (the member restarted) starts a
// new one.
func (w *etcdWatch) count(voter string, at time.Time, changes float64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	last, seen := w.last[voter]
	w.last[voter] = changes
	if !seen || changes < last {
		return
	}
	// A counter read from the member's metrics is held before anything is
	// allocated for it: at most one change per millisecond of the poll
	// interval, far more than etcd can elect (an election takes at least a
	// heartbeat).
	for range min(int(changes-last), int(etcdWatchEvery/time.Millisecond)) {
		w.elections[voter] = append(w.elections[voter], at)
	}
}

// leaderChanges is, by voter, when its member saw the leader change.
func (w *etcdWatch) leaderChanges() map[string][]time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string][]time.Time, len(w.elections))
	for v, ts := range w.elections {
		out[v] = slices.Clone(ts)
	}
	return out
}

// intervals is every voter's intervals without a leader or with a peer
// missing, those still open closed at now.
func (w *etcdWatch) intervals(now time.Time) map[string][]Interval {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.spans.all(now)
}

// memberState is what one reading of a member's metrics says.
type memberState struct {
	led           bool
	connected     int
	leaderChanges float64
}

// Families readState reads of a member's page.
const (
	metricHasLeader     = "etcd_server_has_leader"
	metricLeaderChanges = "etcd_server_leader_changes_seen_total"
	metricActivePeers   = "etcd_network_active_peers"
)

// readState reads etcd_server_has_leader and
// etcd_server_leader_changes_seen_total, and counts the distinct peers
// etcd_network_active_peers shows active (docs/facts.md: a gauge per peer
// pair, above zero when a stream is up). A page that cannot be read or
// parsed, or has no etcd_server_has_leader, tells nothing.
func readState(ctx context.Context, client *http.Client) (st memberState, ok bool) {
	p, err := metricscrape.Fetch(ctx, client, "http://"+localMetrics+"/metrics")
	if err != nil {
		return st, false
	}
	led, seen := p.Value(metricHasLeader, nil)
	if !seen {
		return st, false
	}
	st.led = led != 0
	st.leaderChanges, _ = p.Value(metricLeaderChanges, nil)
	remotes := map[string]bool{}
	for _, s := range p.Series(metricActivePeers, nil) {
		if r := s.Labels["Remote"]; r != "" && s.Value > 0 {
			remotes[r] = true
		}
	}
	st.connected = len(remotes)
	return st, true
}
