//go:build linux

package campaign

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fleet-role/fleet-role/lab/etcdproc"
	"github.com/fleet-role/fleet-role/lab/netlab"
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

// readState reads etcd_server_has_leader and
// etcd_server_leader_changes_seen_total, and counts the distinct peers
// etcd_network_active_peers shows active (docs/facts.md: a gauge per peer
// pair, above zero when a stream is up).
func readState(ctx context.Context, client *http.Client) (st memberState, ok bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+localMetrics+"/metrics", nil)
	if err != nil {
		return st, false
	}
	resp, err := client.Do(req)
	if err != nil {
		return st, false
	}
	defer resp.Body.Close()
	remotes := map[string]bool{}
	seen := false
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "etcd_server_has_leader "):
			seen = true
			st.led = strings.TrimSpace(strings.TrimPrefix(l, "etcd_server_has_leader ")) != "0"
		case strings.HasPrefix(l, "etcd_server_leader_changes_seen_total "):
			if v, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimPrefix(l, "etcd_server_leader_changes_seen_total ")), 64); err == nil {
				st.leaderChanges = v
			}
		case strings.HasPrefix(l, "etcd_network_active_peers{"):
			i := strings.LastIndexByte(l, ' ')
			if v, err := strconv.ParseFloat(l[i+1:], 64); err == nil && v > 0 {
				if _, rest, found := strings.Cut(l, `Remote="`); found {
					r, _, _ := strings.Cut(rest, `"`)
					remotes[r] = true
				}
			}
		}
	}
	if sc.Err() != nil || !seen {
		return memberState{}, false
	}
	st.connected = len(remotes)
	return st, true
}
