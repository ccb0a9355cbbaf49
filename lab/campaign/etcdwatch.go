//go:build linux

package campaign

import (
	"bufio"
	"context"
	"net"
	"net/http"
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
	since map[string]time.Time  // a voter's current interval, when one is open
	held  map[string][]Interval // each voter's closed intervals
}

func watchEtcd(ctx context.Context, lab *netlab.Lab, voters []string) *etcdWatch {
	w := &etcdWatch{since: map[string]time.Time{}, held: map[string][]Interval{}}
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
		led, connected, ok := readState(ctx, client)
		if !ok {
			continue // a stopped or starved member answers late: nothing learnt
		}
		w.mark(voter, time.Now(), !led || connected < peers)
	}
}

// mark opens or closes the voter's interval.
func (w *etcdWatch) mark(voter string, at time.Time, held bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	from, open := w.since[voter]
	switch {
	case held && !open:
		w.since[voter] = at
	case !held && open:
		w.held[voter] = append(w.held[voter], Interval{From: from, To: at})
		delete(w.since, voter)
	}
}

// intervals is every voter's intervals without a leader or with a peer
// missing, those still open closed at now.
func (w *etcdWatch) intervals(now time.Time) map[string][]Interval {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string][]Interval{}
	for v, is := range w.held {
		out[v] = append(out[v], is...)
	}
	for v, from := range w.since {
		out[v] = append(out[v], Interval{From: from, To: now})
	}
	return out
}

// readState reads etcd_server_has_leader and counts the distinct peers
// etcd_network_active_peers shows active (docs/facts.md: a gauge per peer
// pair, above zero when a stream is up).
func readState(ctx context.Context, client *http.Client) (led bool, connected int, ok bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+localMetrics+"/metrics", nil)
	if err != nil {
		return false, 0, false
	}
	resp, err := client.Do(req)
	if err != nil {
		return false, 0, false
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
			led = strings.TrimSpace(strings.TrimPrefix(l, "etcd_server_has_leader ")) != "0"
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
		return false, 0, false
	}
	return led, len(remotes), true
}
