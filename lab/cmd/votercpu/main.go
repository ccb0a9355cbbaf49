//go:build linux

// Command votercpu is the experiment behind the campaign's voter-cpu fault:
// which signals see an etcd voter starved of CPU at k3s's timing (heartbeat
// 500 ms, election timeout 5 s), and from what starvation on etcd itself
// suffers (late heartbeats, leader changes, slow applies).
//
// It starts a three-member etcd cluster (one process per member, data on a
// tmpfs so that a disk adds nothing), writes to every member at a small k3s
// control plane's rate (about 20 puts a second of 1 to 4 KiB, as API servers
// write leases and ConfigMaps, each server to its own member), then starves
// one member, a follower or the leader, at each quota and period given, in a
// cgroup (lab/fault/cpulimit) together with a probe-like process: it sleeps 100 ms
// in a loop (how late a timer wakes), connects to the other members' peer
// ports and scrapes its own member's /metrics once a second, as fleet-role's
// probe does. From outside, it connects to the starved member's peer port
// as the others' probes do, and reads every member's metrics and logs.
//
// Run as root: go run ./lab/cmd/votercpu -out DIR. Each trial's figures go to
// DIR/trials.jsonl and a table to stdout.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/fleet-role/fleet-role/internal/etcdmetrics"
	"github.com/fleet-role/fleet-role/lab/fault/cpulimit"
	"github.com/fleet-role/fleet-role/lab/kit/toolcache"
	"github.com/fleet-role/fleet-role/lab/run/etcdproc"
)

// k3s's timing (docs/facts.md, k3s overrides etcd's defaults).
const (
	heartbeat       = 500 * time.Millisecond
	electionTimeout = 5 * time.Second
	// probePeriod is how often the probe-like process samples; the
	// campaign's probes sample about this often.
	probePeriod = time.Second
	// readingTimeout bounds the experiment's connects and scrapes: the
	// election timeout, the probe's bound at a period of 10 s or more
	// (probe.ReadingTimeout), so that how long they really take is seen.
	readingTimeout = electionTimeout
	timerSleep     = 100 * time.Millisecond
	timerWindow    = 2 * time.Second
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "inner" {
		inner(os.Args[2], os.Args[3:])
		return
	}
	out := flag.String("out", "", "directory for trials.jsonl and the members' logs (required)")
	duration := flag.Duration("duration", 90*time.Second, "how long each trial starves its member")
	rate := flag.Float64("rate", 21, "puts a second, spread over the three members")
	trials := flag.String("trials", "0@100ms,0.2@100ms,0.05@100ms,0.02@100ms,0.01@100ms,0.2@1s,0.05@1s,0.02@1s,0.01@1s,0.005@1s",
		"fraction@period of each trial; 0 is no quota (a baseline)")
	roles := flag.String("roles", "follower,leader", "which member to starve in each trial")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "votercpu: -out is required")
		os.Exit(2)
	}
	// Interrupted, it still stops etcd, removes the cgroup and unmounts
	// the tmpfs: the deferred cleanups run once the context ends.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *out, *duration, *rate, *trials, strings.Split(*roles, ",")); err != nil {
		fmt.Fprintln(os.Stderr, "votercpu:", err)
		os.Exit(1)
	}
}

type trialSpec struct {
	fraction float64
	period   time.Duration
}

func parseTrials(s string) ([]trialSpec, error) {
	var out []trialSpec
	for _, f := range strings.Split(s, ",") {
		frac, per, ok := strings.Cut(f, "@")
		if !ok {
			return nil, fmt.Errorf("trial %q: want fraction@period", f)
		}
		x, err := strconv.ParseFloat(frac, 64)
		if err != nil {
			return nil, fmt.Errorf("trial %q: %w", f, err)
		}
		p, err := time.ParseDuration(per)
		if err != nil {
			return nil, fmt.Errorf("trial %q: %w", f, err)
		}
		if x > 0 {
			if _, err := cpulimit.Quota(x, p); err != nil {
				return nil, fmt.Errorf("trial %q: %w", f, err)
			}
		}
		out = append(out, trialSpec{x, p})
	}
	return out, nil
}

func run(ctx context.Context, out string, duration time.Duration, rate float64, trialsFlag string, roles []string) error {
	specs, err := parseTrials(trialsFlag)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	bin := os.Getenv("FLEET_ROLE_ETCD")
	if bin == "" {
		bin = toolcache.EtcdPath()
	}
	data, err := os.MkdirTemp("", "votercpu-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(data)
	if err := unix.Mount("tmpfs", data, "tmpfs", 0, "size=1g,mode=0700"); err != nil {
		return fmt.Errorf("mount a tmpfs for the data: %w", err)
	}
	defer unix.Unmount(data, unix.MNT_DETACH)

	logFile, err := os.Create(filepath.Join(out, "etcd.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	logs := &logCounter{out: logFile, counts: map[string]map[string]int{}}
	c, err := etcdproc.Start(context.Background(), etcdproc.Config{
		Binary: bin, Dir: data, Members: 3,
		HeartbeatInterval: heartbeat, ElectionTimeout: electionTimeout,
		Stdout: logs,
	})
	if err != nil {
		return err
	}
	defer c.Stop()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	lat := &latencies{}
	var wg sync.WaitGroup
	for _, m := range c.Members {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{m.ClientURL}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			return err
		}
		defer cli.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			writeLoad(ctx, cli, m.Name, rate/float64(len(c.Members)), lat)
		}()
	}
	defer wg.Wait()
	defer cancel()

	fmt.Printf("3 members, heartbeat %v, election timeout %v, %.0f puts/s of 1-4 KiB; warming up 20 s\n", heartbeat, electionTimeout, rate)
	if !sleep(ctx, 20*time.Second) {
		return ctx.Err()
	}

	jf, err := os.Create(filepath.Join(out, "trials.jsonl"))
	if err != nil {
		return err
	}
	defer jf.Close()
	for _, spec := range specs {
		for _, role := range roles {
			res, err := trial(ctx, c, logs, lat, spec, role, duration)
			if err != nil {
				return fmt.Errorf("trial %v %s: %w", spec, role, err)
			}
			b, _ := json.Marshal(res)
			jf.Write(append(b, '\n'))
			res.print(os.Stdout)
		}
	}
	return nil
}

// writeLoad puts values of 1 to 4 KiB at rate a second through one member,
// over 100 keys, as an API server updates leases and ConfigMaps: the
// database stays small while every put is a raft entry, a WAL fsync and a
// backend write on every member.
func writeLoad(ctx context.Context, cli *clientv3.Client, member string, rate float64, lat *latencies) {
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	buf := bytes.Repeat([]byte("x"), 4096)
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		size := 1024 + rand.IntN(3*1024+1)
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		start := time.Now()
		_, err := cli.Put(pctx, fmt.Sprintf("/registry/configmaps/%s-%d", member, i%100), string(buf[:size]))
		cancel()
		lat.add(member, time.Since(start), err)
	}
}

type latencies struct {
	mu     sync.Mutex
	byName map[string][]float64
	fails  map[string]int
}

func (l *latencies) add(name string, d time.Duration, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byName == nil {
		l.byName, l.fails = map[string][]float64{}, map[string]int{}
	}
	if err != nil {
		l.fails[name]++
		return
	}
	l.byName[name] = append(l.byName[name], d.Seconds())
}

func (l *latencies) take() (map[string][]float64, map[string]int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, f := l.byName, l.fails
	l.byName, l.fails = map[string][]float64{}, map[string]int{}
	return b, f
}

// logCounter copies the members' logs to a file and counts the lines that
// say etcd suffers, by member. etcdproc writes each line of a member's log
// with one Write, prefixed "[NAME] ".
type logCounter struct {
	out    io.Writer
	mu     sync.Mutex
	counts map[string]map[string]int
}

// logMarks are the log messages counted, each under a short name.
var logMarks = map[string]string{
	"leader failed to send out heartbeat on time": "late_heartbeat",
	"slow fdatasync":              "slow_fdatasync",
	"apply request took too long": "slow_apply",
	"is starting a new election":  "election",
	"elected leader":              "elected",
	"lost leader":                 "lost_leader",
}

func (w *logCounter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.out.Write(p)
	line := string(p)
	name, _, _ := strings.Cut(strings.TrimPrefix(line, "["), "]")
	for msg, mark := range logMarks {
		if strings.Contains(line, msg) {
			if w.counts[name] == nil {
				w.counts[name] = map[string]int{}
			}
			w.counts[name][mark]++
		}
	}
	return len(p), nil
}

func (w *logCounter) take() map[string]map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := w.counts
	w.counts = map[string]map[string]int{}
	return c
}

// page is one scrape of a member: the reading's snapshot and the counters
// the reading does not keep.
type page struct {
	snap     *etcdmetrics.Snapshot
	counters map[string]float64
}

var extraCounters = []string{
	"etcd_server_heartbeat_send_failures_total",
	"etcd_server_slow_apply_total",
	"etcd_server_slow_read_indexes_total",
	"etcd_server_proposals_failed_total",
	"process_cpu_seconds_total",
}

func scrapePage(ctx context.Context, url string) (*page, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	snap, err := etcdmetrics.Parse(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	snap.Time = time.Now()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", url, err)
	}
	pg := &page{snap: snap, counters: map[string]float64{}}
	for _, name := range extraCounters {
		if f := fams[name]; f != nil {
			for _, m := range f.GetMetric() {
				switch {
				case m.GetCounter() != nil:
					pg.counters[name] += m.GetCounter().GetValue()
				case m.GetGauge() != nil:
					pg.counters[name] += m.GetGauge().GetValue()
				}
			}
		}
	}
	return pg, nil
}

func scrapeAll(c *etcdproc.Cluster) (map[string]*page, error) {
	out := map[string]*page{}
	for _, m := range c.Members {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		p, err := scrapePage(ctx, m.MetricsURL)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("scrape %s: %w", m.Name, err)
		}
		out[m.Name] = p
	}
	return out, nil
}

// waitStable waits until one leader has held for 10 s (two election
// timeouts) and every member sees it, so that a trial starts from a settled
// cluster.
func waitStable(ctx context.Context, c *etcdproc.Cluster) (*etcdproc.Member, error) {
	deadline := time.Now().Add(3 * time.Minute)
	var since time.Time
	var last *etcdproc.Member
	for time.Now().Before(deadline) {
		l, err := c.Leader(context.Background())
		ok := err == nil
		if ok {
			id, _ := strconv.ParseUint(l.MemberID(), 16, 64)
			for _, m := range c.Members {
				st, err := m.Status(context.Background())
				if err != nil || st.Leader != id {
					ok = false
				}
			}
		}
		switch {
		case !ok:
			last, since = nil, time.Time{}
		case l != last:
			last, since = l, time.Now()
		case time.Since(since) >= 2*electionTimeout:
			return l, nil
		}
		if !sleep(ctx, time.Second) {
			return nil, ctx.Err()
		}
	}
	return nil, errors.New("no stable leader within 3 minutes")
}

// Result is one trial's figures.
type Result struct {
	Role            string  `json:"role"`
	Fraction        float64 `json:"fraction"`
	PeriodMs        int64   `json:"period_ms"`
	Starved         string  `json:"starved"`
	Seconds         float64 `json:"seconds"`
	StarvedCPUShare float64 `json:"starved_cpu_share"` // the member's process_cpu_seconds gained / wall
	Throttled       string  `json:"throttled"`         // periods throttled / periods, throttled time
	LeaderChanges   int     `json:"leader_changes"`    // the most any member saw
	LeaderAfter     string  `json:"leader_after"`
	// Per member: the gains.
	Members map[string]memberResult `json:"members"`
	// Connects from outside (the others' probes) to the starved member's
	// peer port, and from the starved probe to the others.
	ConnectToStarved   stats                     `json:"connect_to_starved_ms"`
	ConnectFromStarved stats                     `json:"connect_from_starved_ms"`
	ScrapeOwn          stats                     `json:"scrape_own_ms"` // the starved probe's scrape of its member
	ScrapeOwnFailed    int                       `json:"scrape_own_failed"`
	ConnectFromFailed  int                       `json:"connect_from_starved_failed"`
	HasLeaderFalse     int                       `json:"has_leader_false_samples"` // of the starved member's own scrapes
	TimerLateMax       float64                   `json:"timer_late_max_ms"`
	TimerLateMedian    float64                   `json:"timer_late_median_of_2s_max_ms"`
	Puts               map[string]stats          `json:"puts_ms"`
	PutFails           map[string]int            `json:"put_fails"`
	Logs               map[string]map[string]int `json:"logs"`
	// Load is the machine's load average over one minute at the trial's
	// end: other work on a shared machine is noise in every figure.
	Load string `json:"load"`
}

type memberResult struct {
	Starved        bool            `json:"starved"`
	WAL            hist            `json:"wal_fsync"`
	Backend        hist            `json:"backend_commit"`
	RTT            map[string]hist `json:"peer_rtt"` // by the peer's name
	HeartbeatFails float64         `json:"heartbeat_send_failures"`
	SlowApplies    float64         `json:"slow_applies"`
	ReadIndexSlow  float64         `json:"slow_read_indexes"`
	CPUSeconds     float64         `json:"cpu_seconds"`
	HasLeaderEnd   bool            `json:"has_leader_at_end"`
}

type hist struct {
	N     uint64  `json:"n"`
	P90ms float64 `json:"p90_ms"`
	P99ms float64 `json:"p99_ms"`
	Mean  float64 `json:"mean_ms"`
}

func toHist(g etcdmetrics.Gain) hist {
	h := hist{N: g.Count}
	if g.Count == 0 {
		return h
	}
	if v, ok := g.Histogram.Quantile(0.9); ok {
		h.P90ms = v * 1e3
	}
	if v, ok := g.Histogram.Quantile(0.99); ok {
		h.P99ms = v * 1e3
	}
	h.Mean = g.SumSeconds / float64(g.Count) * 1e3
	return h
}

type stats struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
	// Over is the share of the readings over connectLimit: the p99 of a
	// window is over the limit once more than 1% of its readings are.
	Over float64 `json:"over_limit"`
}

// connectLimit is fleet-role's connect limit at k3s's timing
// (docs/limits.md: election_timeout / 20).
const connectLimit = electionTimeout / 20

// statsOf takes seconds and gives milliseconds, the p99 by nearest rank.
func statsOf(v []float64) stats {
	if len(v) == 0 {
		return stats{}
	}
	s := slices.Clone(v)
	sort.Float64s(s)
	rank := func(p float64) float64 { return s[int(math.Ceil(p*float64(len(s))))-1] * 1e3 }
	over := 0
	for _, x := range s {
		if x > connectLimit.Seconds() {
			over++
		}
	}
	return stats{N: len(s), P50: rank(0.5), P99: rank(0.99), Max: s[len(s)-1] * 1e3, Over: float64(over) / float64(len(s))}
}

// innerSample is one line the probe-like process writes.
type innerSample struct {
	Kind      string             `json:"kind"` // "probe" or "timer"
	ConnectMs map[string]float64 `json:"connect_ms,omitempty"`
	ConnErr   map[string]string  `json:"connect_err,omitempty"`
	ScrapeMs  float64            `json:"scrape_ms,omitempty"`
	ScrapeErr string             `json:"scrape_err,omitempty"`
	HasLeader bool               `json:"has_leader,omitempty"`
	LateMaxMs float64            `json:"late_max_ms,omitempty"`
}

func trial(ctx context.Context, c *etcdproc.Cluster, logs *logCounter, lat *latencies, spec trialSpec, role string, duration time.Duration) (*Result, error) {
	leader, err := waitStable(ctx, c)
	if err != nil {
		return nil, err
	}
	target := leader
	if role == "follower" {
		for _, m := range c.Members {
			if m != leader {
				target = m
				break
			}
		}
	}
	var others []*etcdproc.Member
	var peers []string
	for _, m := range c.Members {
		if m != target {
			others = append(others, m)
			peers = append(peers, strings.TrimPrefix(m.PeerURL, "http://"))
		}
	}
	g, err := cpulimit.New(cpulimit.Config{})
	if err != nil {
		return nil, err
	}
	defer g.Remove()
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	probe := exec.Command(self, append([]string{"inner", target.MetricsURL}, peers...)...)
	probe.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	probeOut, err := probe.StdoutPipe()
	if err != nil {
		return nil, err
	}
	probe.Stderr = os.Stderr
	if err := probe.Start(); err != nil {
		return nil, err
	}
	defer func() {
		probe.Process.Kill()
		probe.Wait()
	}()
	for _, pid := range []int{target.PID(), probe.Process.Pid} {
		if err := g.Add(pid); err != nil {
			return nil, err
		}
	}
	var samples []innerSample
	var smu sync.Mutex
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		sc := bufio.NewScanner(probeOut)
		for sc.Scan() {
			var s innerSample
			if json.Unmarshal(sc.Bytes(), &s) == nil {
				smu.Lock()
				samples = append(samples, s)
				smu.Unlock()
			}
		}
	}()

	before, err := scrapeAll(c)
	if err != nil {
		return nil, err
	}
	logs.take()
	lat.take()
	smu.Lock()
	samples = nil
	smu.Unlock()
	stat0, err := g.Stat()
	if err != nil {
		return nil, err
	}
	if spec.fraction > 0 {
		if err := g.SetQuota(spec.fraction, spec.period); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	// The others' probes: a connect to the starved member's peer port once
	// a probe period.
	var toStarved []float64
	addr := strings.TrimPrefix(target.PeerURL, "http://")
	for time.Since(start) < duration {
		t0 := time.Now()
		conn, err := net.DialTimeout("tcp", addr, readingTimeout)
		if err == nil {
			toStarved = append(toStarved, time.Since(t0).Seconds())
			conn.Close()
		} else {
			toStarved = append(toStarved, readingTimeout.Seconds())
		}
		if !sleep(ctx, probePeriod-time.Since(t0)%probePeriod) {
			return nil, ctx.Err()
		}
	}
	stat1, err := g.Stat()
	if err != nil {
		return nil, err
	}
	if err := g.Unlimit(); err != nil {
		return nil, err
	}
	elapsed := time.Since(start)
	after, err := scrapeAll(c)
	if err != nil {
		return nil, err
	}
	putLat, putFails := lat.take()
	logCounts := logs.take()
	smu.Lock()
	got := slices.Clone(samples)
	smu.Unlock()

	res := &Result{
		Role: role, Fraction: spec.fraction, PeriodMs: spec.period.Milliseconds(), Starved: target.Name,
		Seconds:   elapsed.Seconds(),
		Throttled: fmt.Sprintf("%d/%d periods, %.1f s", stat1.Throttled-stat0.Throttled, stat1.Periods-stat0.Periods, (stat1.ThrottledFor - stat0.ThrottledFor).Seconds()),
		Members:   map[string]memberResult{},
		Puts:      map[string]stats{}, PutFails: putFails, Logs: logCounts,
		ConnectToStarved: statsOf(toStarved),
	}
	if l, err := c.Leader(context.Background()); err == nil {
		res.LeaderAfter = l.Name
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		res.Load = strings.Fields(string(b))[0]
	}
	names := map[string]string{}
	for _, m := range c.Members {
		names[m.MemberID()] = m.Name
	}
	for _, m := range c.Members {
		r := etcdmetrics.Gained(before[m.Name].snap, after[m.Name].snap)
		mr := memberResult{
			Starved: m == target,
			WAL:     toHist(r.WALFsync), Backend: toHist(r.BackendCommit),
			RTT:            map[string]hist{},
			HeartbeatFails: after[m.Name].counters["etcd_server_heartbeat_send_failures_total"] - before[m.Name].counters["etcd_server_heartbeat_send_failures_total"],
			SlowApplies:    after[m.Name].counters["etcd_server_slow_apply_total"] - before[m.Name].counters["etcd_server_slow_apply_total"],
			ReadIndexSlow:  after[m.Name].counters["etcd_server_slow_read_indexes_total"] - before[m.Name].counters["etcd_server_slow_read_indexes_total"],
			CPUSeconds:     after[m.Name].counters["process_cpu_seconds_total"] - before[m.Name].counters["process_cpu_seconds_total"],
			HasLeaderEnd:   after[m.Name].snap.HasLeader,
		}
		for id, gain := range r.PeerRTT {
			mr.RTT[names[id]] = toHist(gain)
		}
		res.Members[m.Name] = mr
		res.LeaderChanges = max(res.LeaderChanges, int(r.LeaderChanges))
		if m == target {
			res.StarvedCPUShare = mr.CPUSeconds / elapsed.Seconds()
		}
	}
	for name, v := range putLat {
		res.Puts[name] = statsOf(v)
	}
	var from, scrape, lateMax []float64
	for _, s := range got {
		switch s.Kind {
		case "probe":
			for _, v := range s.ConnectMs {
				from = append(from, v/1e3)
			}
			res.ConnectFromFailed += len(s.ConnErr)
			if s.ScrapeErr != "" {
				res.ScrapeOwnFailed++
				scrape = append(scrape, readingTimeout.Seconds())
			} else {
				scrape = append(scrape, s.ScrapeMs/1e3)
				if !s.HasLeader {
					res.HasLeaderFalse++
				}
			}
		case "timer":
			lateMax = append(lateMax, s.LateMaxMs/1e3)
		}
	}
	res.ConnectFromStarved = statsOf(from)
	res.ScrapeOwn = statsOf(scrape)
	if st := statsOf(lateMax); st.N > 0 {
		res.TimerLateMax, res.TimerLateMedian = st.Max, st.P50
	}
	return res, nil
}

func (r *Result) print(w io.Writer) {
	q := "none"
	if r.Fraction > 0 {
		q = fmt.Sprintf("%.1f%%/%dms", r.Fraction*100, r.PeriodMs)
	}
	fmt.Fprintf(w, "\n== %s %s starved (%s), %.0f s, load %s: etcd used %.1f%% of a core; throttled %s; leader changes %d, leader after: %s\n",
		r.Role, r.Starved, q, r.Seconds, r.Load, r.StarvedCPUShare*100, r.Throttled, r.LeaderChanges, r.LeaderAfter)
	names := make([]string, 0, len(r.Members))
	for n := range r.Members {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		m := r.Members[n]
		mark := " "
		if m.Starved {
			mark = "*"
		}
		var rtts []string
		peers := make([]string, 0, len(m.RTT))
		for p := range m.RTT {
			peers = append(peers, p)
		}
		sort.Strings(peers)
		for _, p := range peers {
			h := m.RTT[p]
			rtts = append(rtts, fmt.Sprintf("->%s n%d p99 %.1f", p, h.N, h.P99ms))
		}
		fmt.Fprintf(w, "  %s%s wal n%d p90 %.2f p99 %.2f | commit n%d p90 %.2f p99 %.2f | rtt %s | hb-fail %.0f slow-apply %.0f slow-readidx %.0f | cpu %.1fs | has_leader %v | logs %v\n",
			mark, n, m.WAL.N, m.WAL.P90ms, m.WAL.P99ms, m.Backend.N, m.Backend.P90ms, m.Backend.P99ms, strings.Join(rtts, " "),
			m.HeartbeatFails, m.SlowApplies, m.ReadIndexSlow, m.CPUSeconds, m.HasLeaderEnd, r.Logs[n])
	}
	fmt.Fprintf(w, "  connect to starved ms p50 %.2f p99 %.2f max %.2f (%.1f%% over %v) | from starved p50 %.2f p99 %.2f max %.2f (%.1f%% over, failed %d) | own scrape ms p50 %.1f p99 %.1f max %.1f (%.1f%% over %v, failed %d, no leader %d) | timer late max %.1f ms (median of 2 s maxima %.1f)\n",
		r.ConnectToStarved.P50, r.ConnectToStarved.P99, r.ConnectToStarved.Max, r.ConnectToStarved.Over*100, connectLimit,
		r.ConnectFromStarved.P50, r.ConnectFromStarved.P99, r.ConnectFromStarved.Max, r.ConnectFromStarved.Over*100, r.ConnectFromFailed,
		r.ScrapeOwn.P50, r.ScrapeOwn.P99, r.ScrapeOwn.Max, r.ScrapeOwn.Over*100, connectLimit, r.ScrapeOwnFailed, r.HasLeaderFalse, r.TimerLateMax, r.TimerLateMedian)
	var puts []string
	for _, n := range names {
		p := r.Puts[n]
		puts = append(puts, fmt.Sprintf("%s n%d p50 %.1f p99 %.1f max %.1f fail %d", n, p.N, p.P50, p.P99, p.Max, r.PutFails[n]))
	}
	fmt.Fprintf(w, "  puts ms: %s\n", strings.Join(puts, "; "))
}

// inner is the probe-like process in the starved member's group: a timer
// loop, and once a period a connect to every other member's peer port and a
// scrape of its own member, each bounded as the probe bounds them.
func inner(metricsURL string, peers []string) {
	enc := json.NewEncoder(os.Stdout)
	var mu sync.Mutex
	emit := func(s innerSample) {
		mu.Lock()
		enc.Encode(s)
		mu.Unlock()
	}
	go func() {
		for {
			end := time.Now().Add(timerWindow)
			var late time.Duration
			for time.Now().Before(end) {
				t0 := time.Now()
				time.Sleep(timerSleep)
				late = max(late, time.Since(t0)-timerSleep)
			}
			emit(innerSample{Kind: "timer", LateMaxMs: late.Seconds() * 1e3})
		}
	}()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for {
		t0 := time.Now()
		s := innerSample{Kind: "probe", ConnectMs: map[string]float64{}, ConnErr: map[string]string{}}
		var wg sync.WaitGroup
		var smu sync.Mutex
		for _, p := range peers {
			wg.Go(func() {
				c0 := time.Now()
				conn, err := net.DialTimeout("tcp", p, readingTimeout)
				d := time.Since(c0)
				smu.Lock()
				defer smu.Unlock()
				if err != nil {
					s.ConnErr[p] = err.Error()
					return
				}
				conn.Close()
				s.ConnectMs[p] = d.Seconds() * 1e3
			})
		}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), readingTimeout)
			defer cancel()
			c0 := time.Now()
			snap, err := etcdmetrics.Scrape(ctx, client, metricsURL)
			d := time.Since(c0)
			smu.Lock()
			defer smu.Unlock()
			if err != nil {
				s.ScrapeErr = err.Error()
				return
			}
			s.ScrapeMs = d.Seconds() * 1e3
			s.HasLeader = snap.HasLeader
		})
		wg.Wait()
		emit(s)
		time.Sleep(probePeriod - time.Since(t0)%probePeriod)
	}
}

// sleep waits d, or until ctx ends: it reports whether the wait ran out.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
