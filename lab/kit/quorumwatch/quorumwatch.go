// Package quorumwatch watches an etcd cluster and the Kubernetes API server
// above it while something changes the cluster's membership, and says
// afterwards what a client would have lived through: how many membership
// changes were in flight at once, how long fewer than a quorum of voters
// had a leader, and whether a write the API server acknowledged was lost.
//
// It is harness, and it is independent of fleet-role: it reads etcd with
// its own clients (k3s's client certificate, given as a TLS configuration)
// and writes through the API server with the client it is given, so a test
// of fleet-role's acting mode judges fleet-role's changes by what etcd and
// the API server did, not by what fleet-role says it did.
//
// Two loops run until Stop:
//
//   - the sampler, every Interval (250 ms by default): etcd's member list
//     (through any member that answers), then the status of every started
//     member through a connection of its own (its leader and raft term);
//   - the writer, without pause: a ConfigMap's counter, each update made
//     with the resourceVersion of the last one acknowledged, each
//     acknowledged value recorded; after an error it reads the ConfigMap
//     back (a quorum read) and counts every acknowledged value missing from
//     it as lost. Stop reads it back once more.
//
// Neither fails on an unreachable endpoint: the sampler counts a member
// list or a status it could not read and samples again; the writer counts
// the error and writes again.
package quorumwatch

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Config says what to watch.
type Config struct {
	// Endpoints are etcd client URLs to read the member list from at
	// first; from the first member list on, the voters' own client URLs.
	Endpoints []string
	// TLS is the etcd clients' TLS configuration (k3s's client
	// certificate and its etcd server CA).
	TLS *tls.Config
	// Kube is the API server's client configuration. The writer makes a
	// client of its own from it, without client-go's client-side rate
	// limit (5 requests a second by default, shared by every user of a
	// client): a write's latency is then the API server's and etcd's, not
	// a queue's in this process. Namespace and Name are its ConfigMap
	// (created, and deleted at Stop); Namespace defaults to "default",
	// Name to "quorumwatch".
	Kube            *rest.Config
	Namespace, Name string
	// Interval is the sampler's period; 250 ms when zero.
	Interval time.Duration
	// Logf, when set, is told of every membership change seen and of the
	// first error of every run of errors.
	Logf func(format string, args ...any)
}

// Event is a change of etcd's membership the sampler saw between two member
// lists.
type Event struct {
	At     time.Time
	Kind   EventKind
	Member string // its name, or its ID in hex when it has not started
	ID     uint64
}

// EventKind is what changed.
type EventKind string

// The membership changes.
const (
	AddedLearner EventKind = "added as learner"
	AddedVoter   EventKind = "added as voter"
	Promoted     EventKind = "promoted"
	Removed      EventKind = "removed"
)

// Figures are what the watch saw.
type Figures struct {
	// Samples is how many samples were taken; MemberListErrors how many
	// of them read no member list and StatusErrors how many member
	// statuses could not be read (a member down, restarting, or slow
	// past the status timeout).
	Samples, MemberListErrors, StatusErrors int
	// LongestGap is the longest time between two member lists read.
	LongestGap time.Duration
	// MaxLearners is the most learners seen in one member list.
	MaxLearners int
	// MaxInFlight is the most membership changes in flight seen at once:
	// at a sample, its learners (adds not yet complete) plus the members
	// removed, promoted or added as voters since the member list before.
	// RemovesBesideLearner counts removals seen while another member was
	// a learner, in that member list or the one before.
	MaxInFlight, RemovesBesideLearner int
	// LongestLeaderless is the longest time from a sample at which fewer
	// than a quorum of the voters (of the last member list read) reported
	// a leader to the next sample at which a quorum did (an upper bound of
	// the true span by up to one sample's spacing). A voter whose status
	// could not be read did not report one.
	LongestLeaderless time.Duration
	// LeaderChanges counts changes of the leader a quorum of voters
	// reported; FirstTerm and LastTerm are the highest raft terms reported
	// at the first and the last sample.
	LeaderChanges       int
	FirstTerm, LastTerm uint64
	// Events are the membership changes seen, in order.
	Events []Event

	// Acked is how many writes the API server acknowledged, Lost how many
	// of those a later read did not find, WriteErrors how many writes
	// returned an error (unreachable, timed out, refused), Conflicts how
	// many were refused for a resourceVersion that had moved (an earlier
	// write whose answer was lost had landed).
	Acked, Lost, WriteErrors, Conflicts int
	// LastAcked is the highest value acknowledged, ReadBack the value read
	// at Stop (-1 when Stop could not read it).
	LastAcked, ReadBack int64
	// WriteMedian and WriteMax are acknowledged writes' latencies;
	// LongestWriteGap the longest time between two acknowledgements (or
	// from the start to the first).
	WriteMedian, WriteMax, LongestWriteGap time.Duration
	// Duration is how long the watch ran.
	Duration time.Duration
}

// Watch is a running watch.
type Watch struct {
	cfg    Config
	kube   kubernetes.Interface
	cancel context.CancelFunc
	wg     sync.WaitGroup
	began  time.Time

	mu      sync.Mutex
	fig     Figures
	latency []time.Duration
	latest  Sample
}

// Sample is what one sample read: the member list (of the last read, when
// this sample read none) and each member's status.
type Sample struct {
	At            time.Time
	MemberListErr error
	Members       []*pb.Member
	// Leader is each started member's leader by its own status, 0 when it
	// reports none; a member whose status could not be read is absent.
	Leader map[uint64]uint64
	Term   map[uint64]uint64
}

// Start starts the sampler and the writer. The ConfigMap is created before
// it returns, so a test can rely on the writer running.
func Start(ctx context.Context, cfg Config) (*Watch, error) {
	if cfg.Interval == 0 {
		cfg.Interval = 250 * time.Millisecond
	}
	if cfg.Namespace == "" {
		cfg.Namespace = "default"
	}
	if cfg.Name == "" {
		cfg.Name = "quorumwatch"
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	if len(cfg.Endpoints) == 0 || cfg.TLS == nil || cfg.Kube == nil {
		return nil, errors.New("quorumwatch: Endpoints, TLS and Kube are required")
	}
	kcfg := rest.CopyConfig(cfg.Kube)
	kcfg.QPS, kcfg.Burst = -1, 0 // no client-side rate limit
	kube, err := kubernetes.NewForConfig(kcfg)
	if err != nil {
		return nil, fmt.Errorf("quorumwatch: API client: %w", err)
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: cfg.Endpoints,
		TLS:       cfg.TLS,
		Logger:    zap.NewNop(),
		// No DialTimeout: New returns at once and a call waits for a
		// connection only as long as its own context allows.
	})
	if err != nil {
		return nil, fmt.Errorf("quorumwatch: etcd client at %v: %w", cfg.Endpoints, err)
	}
	cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
	defer ccancel()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: cfg.Name, Namespace: cfg.Namespace},
		Data: map[string]string{"counter": "0"}}
	cm, err = kube.CoreV1().ConfigMaps(cfg.Namespace).Create(cctx, cm, metav1.CreateOptions{})
	if err != nil {
		cli.Close()
		return nil, fmt.Errorf("quorumwatch: create the writer's ConfigMap %s/%s: %w", cfg.Namespace, cfg.Name, err)
	}
	rctx, cancel := context.WithCancel(context.Background())
	w := &Watch{cfg: cfg, kube: kube, cancel: cancel, began: time.Now()}
	w.fig.ReadBack = -1
	w.wg.Add(2)
	go func() { defer w.wg.Done(); defer cli.Close(); w.sample(rctx, cli) }()
	go func() { defer w.wg.Done(); w.write(rctx, cm) }()
	return w, nil
}

// Latest is the last sample taken.
func (w *Watch) Latest() Sample {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.latest
}

// Stop ends both loops, reads the writer's ConfigMap back (counting every
// acknowledged value missing from it as lost), deletes it, and returns the
// figures.
func (w *Watch) Stop(ctx context.Context) Figures {
	w.cancel()
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.fig.Duration = time.Since(w.began)
	kube := w.kube.CoreV1().ConfigMaps(w.cfg.Namespace)
	// The read-back is retried for a while: the API server may itself be
	// briefly away at the end.
	deadline := time.Now().Add(time.Minute)
	for {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		cm, err := kube.Get(rctx, w.cfg.Name, metav1.GetOptions{})
		cancel()
		if err == nil {
			v, perr := strconv.ParseInt(cm.Data["counter"], 10, 64)
			if perr != nil {
				w.cfg.Logf("quorumwatch: the ConfigMap's counter %q: %v", cm.Data["counter"], perr)
				break
			}
			w.fig.ReadBack = v
			if v < w.fig.LastAcked {
				w.fig.Lost += int(w.fig.LastAcked - v)
			}
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			w.cfg.Logf("quorumwatch: read the ConfigMap back: %v", err)
			break
		}
		w.pause(ctx, 250*time.Millisecond)
	}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	if err := kube.Delete(dctx, w.cfg.Name, metav1.DeleteOptions{}); err != nil {
		w.cfg.Logf("quorumwatch: delete the ConfigMap: %v", err)
	}
	cancel()
	if len(w.latency) > 0 {
		l := slices.Clone(w.latency)
		slices.Sort(l)
		w.fig.WriteMedian = l[len(l)/2]
		w.fig.WriteMax = l[len(l)-1]
	}
	w.fig.Events = slices.Clone(w.fig.Events)
	return w.fig
}

// statusTimeout bounds one member's status and listTimeout the member
// list: a member that does not answer within it counts as not answering,
// and the sample goes on.
const (
	statusTimeout = time.Second
	listTimeout   = 2 * time.Second
)

// firstMemberList asks for the member list through the shared client
// and, when that has not answered within hedge, through every voter's own
// connection too, and returns the first answer: a member that hangs (one
// slowed, or one removed and stopping) holds the shared client's request
// until listTimeout, and the observer must not stop sampling for it. The
// reads are linearizable (a removed member cannot answer with a stale
// list), each a ReadIndex through etcd's leader: hedged, so that a
// healthy fleet is asked once a sample.
func firstMemberList(ctx context.Context, cli *clientv3.Client, conns map[uint64]*clientv3.Client, members []*pb.Member, hedge time.Duration) (*clientv3.MemberListResponse, error) {
	lctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	type answer struct {
		ml  *clientv3.MemberListResponse
		err error
	}
	answers := make(chan answer, 1+len(conns))
	ask := func(c *clientv3.Client) {
		ml, err := c.MemberList(lctx)
		answers <- answer{ml, err}
	}
	go ask(cli)
	asked, hedged := 1, false
	timer := time.NewTimer(hedge)
	defer timer.Stop()
	var first error
	for asked > 0 {
		select {
		case a := <-answers:
			asked--
			if a.err == nil {
				return a.ml, nil
			}
			if first == nil {
				first = a.err
			}
			if hedged {
				continue
			}
		case <-timer.C:
		}
		if !hedged {
			hedged = true
			for _, m := range members {
				if c := conns[m.ID]; c != nil && !m.IsLearner {
					go ask(c)
					asked++
				}
			}
		}
	}
	return nil, first
}

// statusPoller reads one member's status every interval, each read
// bounded by statusTimeout, and keeps the last answer.
type statusPoller struct {
	mu     sync.Mutex
	at     time.Time
	st     *pb.StatusResponse
	err    error
	cancel context.CancelFunc
	done   chan struct{}
}

func (w *Watch) pollStatus(ctx context.Context, c *clientv3.Client) *statusPoller {
	pctx, cancel := context.WithCancel(ctx)
	p := &statusPoller{cancel: cancel, done: make(chan struct{}), err: errors.New("no status read yet")}
	first := make(chan struct{})
	go func() {
		defer close(p.done)
		once := sync.OnceFunc(func() { close(first) })
		defer once()
		tick := time.NewTicker(w.cfg.Interval)
		defer tick.Stop()
		for pctx.Err() == nil {
			sctx, scancel := context.WithTimeout(pctx, statusTimeout)
			st, err := pb.NewMaintenanceClient(c.ActiveConnection()).Status(sctx, &pb.StatusRequest{})
			scancel()
			p.mu.Lock()
			if err == nil {
				p.at, p.st, p.err = time.Now(), st, nil
			} else if pctx.Err() == nil {
				p.err = err
			}
			p.mu.Unlock()
			once()
			select {
			case <-pctx.Done():
			case <-tick.C:
			}
		}
	}()
	// The first read is waited for (at most statusTimeout), so that a
	// member just seen is not counted silent for want of an answer.
	<-first
	return p
}

// latest is the last status read, unless the last read failed or it is
// older than maxAge at now.
func (p *statusPoller) latest(now time.Time, maxAge time.Duration) (*pb.StatusResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.err != nil:
		return nil, p.err
	case now.Sub(p.at) > maxAge:
		return nil, fmt.Errorf("last status read %.1f s ago", now.Sub(p.at).Seconds())
	}
	return p.st, nil
}

func (p *statusPoller) stop() {
	p.cancel()
	<-p.done
}

// sample runs the sampler until ctx ends.
func (w *Watch) sample(ctx context.Context, cli *clientv3.Client) {
	conns := map[uint64]*clientv3.Client{} // a member's own connection, by member ID
	pollers := map[uint64]*statusPoller{}  // its status poller, by member ID
	statusFailing := map[uint64]bool{}     // the member's last status was unread
	defer func() {
		for id, c := range conns {
			pollers[id].stop()
			c.Close()
		}
	}()
	var (
		members     []*pb.Member // the last member list read
		lastList    time.Time
		badSince    time.Time // the first sample of the current run without a quorum's leader
		lastLeader  uint64
		endpoints   string
		listFailing bool
	)
	tick := time.NewTicker(w.cfg.Interval)
	defer tick.Stop()
	for {
		now := time.Now()
		s := Sample{At: now, Leader: map[uint64]uint64{}, Term: map[uint64]uint64{}}
		ml, err := firstMemberList(ctx, cli, conns, members, w.cfg.Interval)
		if ctx.Err() != nil {
			break
		}
		w.mu.Lock()
		w.fig.Samples++
		if err != nil {
			w.fig.MemberListErrors++
			s.MemberListErr = err
			if !listFailing {
				w.cfg.Logf("quorumwatch: etcd's member list unread: %v", err)
			}
			listFailing = true
		} else {
			listFailing = false
			if !lastList.IsZero() {
				w.fig.LongestGap = max(w.fig.LongestGap, now.Sub(lastList))
			}
			lastList = now
			w.compare(now, members, ml.Members, members == nil)
			members = ml.Members
		}
		w.mu.Unlock()
		s.Members = members

		// The voters' own client URLs become the member list's endpoints:
		// a member that left stops being asked.
		var eps []string
		for _, m := range members {
			if !m.IsLearner {
				eps = append(eps, m.ClientURLs...)
			}
		}
		slices.Sort(eps)
		if key := strings.Join(eps, ","); len(eps) > 0 && key != endpoints {
			cli.SetEndpoints(eps...)
			endpoints = key
		}

		// Every started member's status, as its own poller last read it
		// (each through its own connection, every interval): a member on a
		// slow path answers no sooner than its round trip, and the sample
		// must not wait for it. An answer older than statusTimeout and an
		// interval counts as none.
		statusErrs := 0
		for _, m := range members {
			if len(m.ClientURLs) == 0 {
				continue // a learner not started yet
			}
			c := conns[m.ID]
			if c == nil {
				c, err = clientv3.New(clientv3.Config{Endpoints: m.ClientURLs, TLS: w.cfg.TLS, Logger: zap.NewNop()})
				if err != nil {
					statusErrs++
					continue
				}
				conns[m.ID] = c
				pollers[m.ID] = w.pollStatus(ctx, c)
			}
			st, err := pollers[m.ID].latest(now, statusTimeout+w.cfg.Interval)
			if err != nil {
				statusErrs++
				if !statusFailing[m.ID] {
					w.cfg.Logf("quorumwatch: etcd member %s's status unread: %v", memberName(members, m.ID), err)
				}
				statusFailing[m.ID] = true
				continue
			}
			statusFailing[m.ID] = false
			s.Leader[m.ID] = st.Leader
			s.Term[m.ID] = st.RaftTerm
		}
		// Connections of members gone from the list are closed, their
		// pollers stopped.
		for id, c := range conns {
			if !slices.ContainsFunc(members, func(m *pb.Member) bool { return m.ID == id }) {
				pollers[id].stop()
				c.Close()
				delete(conns, id)
				delete(pollers, id)
			}
		}

		w.mu.Lock()
		w.fig.StatusErrors += statusErrs
		voters, leading := 0, map[uint64]int{}
		var term uint64
		for _, m := range members {
			if m.IsLearner {
				continue
			}
			voters++
			if l, ok := s.Leader[m.ID]; ok && l != 0 {
				leading[l]++
			}
		}
		for _, t := range s.Term {
			term = max(term, t)
		}
		if term > 0 {
			if w.fig.FirstTerm == 0 {
				w.fig.FirstTerm = term
			}
			w.fig.LastTerm = max(w.fig.LastTerm, term)
		}
		reporting, leader := 0, uint64(0)
		for l, n := range leading {
			reporting += n
			if n > voters/2 {
				leader = l
			}
		}
		if voters > 0 {
			if reporting < voters/2+1 {
				if badSince.IsZero() {
					badSince = now
					w.cfg.Logf("quorumwatch: %d of %d voters report a leader (quorum %d)", reporting, voters, voters/2+1)
				}
			} else if !badSince.IsZero() {
				span := now.Sub(badSince)
				w.fig.LongestLeaderless = max(w.fig.LongestLeaderless, span)
				w.cfg.Logf("quorumwatch: a quorum of voters reports a leader again after %.2f s", span.Seconds())
				badSince = time.Time{}
			}
		}
		if leader != 0 {
			if lastLeader != 0 && leader != lastLeader {
				w.fig.LeaderChanges++
				w.cfg.Logf("quorumwatch: etcd's leader is now %s (term %d)", memberName(members, leader), term)
			}
			lastLeader = leader
		}
		w.latest = s
		w.mu.Unlock()

		select {
		case <-ctx.Done():
		case <-tick.C:
		}
		if ctx.Err() != nil {
			break
		}
	}
	if !badSince.IsZero() {
		w.mu.Lock()
		w.fig.LongestLeaderless = max(w.fig.LongestLeaderless, time.Since(badSince))
		w.mu.Unlock()
	}
}

// compare records the membership changes from the member list before to
// the one now, and the changes in flight at this sample. first says there
// is no list before. The caller holds w.mu.
func (w *Watch) compare(at time.Time, before, now []*pb.Member, first bool) {
	learners := 0
	for _, m := range now {
		if m.IsLearner {
			learners++
		}
	}
	w.fig.MaxLearners = max(w.fig.MaxLearners, learners)
	if first {
		w.fig.MaxInFlight = max(w.fig.MaxInFlight, learners)
		return
	}
	find := func(list []*pb.Member, id uint64) *pb.Member {
		for _, m := range list {
			if m.ID == id {
				return m
			}
		}
		return nil
	}
	learnerBeside := func(id uint64) bool {
		for _, list := range [][]*pb.Member{before, now} {
			for _, m := range list {
				if m.IsLearner && m.ID != id {
					return true
				}
			}
		}
		return false
	}
	changes := 0
	event := func(kind EventKind, m *pb.Member) {
		e := Event{At: at, Kind: kind, Member: name(m), ID: m.ID}
		w.fig.Events = append(w.fig.Events, e)
		w.cfg.Logf("quorumwatch: etcd member %s %s", e.Member, kind)
	}
	for _, m := range now {
		was := find(before, m.ID)
		switch {
		case was == nil && m.IsLearner:
			event(AddedLearner, m) // counted among the learners
		case was == nil:
			event(AddedVoter, m)
			changes++
		case was.IsLearner && !m.IsLearner:
			event(Promoted, m)
			changes++
		}
	}
	for _, m := range before {
		if find(now, m.ID) == nil {
			event(Removed, m)
			changes++
			if learnerBeside(m.ID) {
				w.fig.RemovesBesideLearner++
			}
		}
	}
	w.fig.MaxInFlight = max(w.fig.MaxInFlight, learners+changes)
}

func name(m *pb.Member) string {
	if m.Name == "" {
		return fmt.Sprintf("%x (not started)", m.ID)
	}
	return m.Name
}

func memberName(members []*pb.Member, id uint64) string {
	for _, m := range members {
		if m.ID == id {
			return name(m)
		}
	}
	return fmt.Sprintf("%x", id)
}

// writeTimeout bounds one write: a write that takes longer counts as an
// error (its outcome unknown until the next read).
const writeTimeout = 5 * time.Second

// write runs the writer until ctx ends. cm is the ConfigMap as created.
func (w *Watch) write(ctx context.Context, cm *corev1.ConfigMap) {
	kube := w.kube.CoreV1().ConfigMaps(w.cfg.Namespace)
	var (
		value     int64 // the value the ConfigMap holds, as last known
		rv        = cm.ResourceVersion
		stale     bool // the last write's outcome is unknown: read first
		lastAck   = time.Now()
		failing   bool
		retryWait = 100 * time.Millisecond
	)
	for ctx.Err() == nil {
		if stale {
			rctx, cancel := context.WithTimeout(ctx, writeTimeout)
			got, err := kube.Get(rctx, w.cfg.Name, metav1.GetOptions{})
			cancel()
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				w.mu.Lock()
				w.fig.WriteErrors++
				w.mu.Unlock()
				w.pause(ctx, retryWait)
				continue
			}
			v, err := strconv.ParseInt(got.Data["counter"], 10, 64)
			if err != nil {
				w.cfg.Logf("quorumwatch: the ConfigMap's counter %q: %v", got.Data["counter"], err)
				return
			}
			w.mu.Lock()
			if v < w.fig.LastAcked {
				w.fig.Lost += int(w.fig.LastAcked - v)
				w.cfg.Logf("quorumwatch: LOST: acknowledged up to %d, read %d", w.fig.LastAcked, v)
				w.fig.LastAcked = v
			}
			w.mu.Unlock()
			value, rv, cm, stale = v, got.ResourceVersion, got, false
		}
		next := cm.DeepCopy()
		next.ResourceVersion = rv
		next.Data = map[string]string{"counter": strconv.FormatInt(value+1, 10)}
		began := time.Now()
		wctx, cancel := context.WithTimeout(ctx, writeTimeout)
		got, err := kube.Update(wctx, next, metav1.UpdateOptions{})
		cancel()
		took := time.Since(began)
		if ctx.Err() != nil {
			return // a write cut short by Stop counts for nothing
		}
		w.mu.Lock()
		switch {
		case err == nil:
			value, rv, cm = value+1, got.ResourceVersion, got
			w.fig.Acked++
			w.fig.LastAcked = value
			w.latency = append(w.latency, took)
			w.fig.LongestWriteGap = max(w.fig.LongestWriteGap, time.Since(lastAck))
			lastAck = time.Now()
			if failing {
				w.cfg.Logf("quorumwatch: writes acknowledged again (value %d)", value)
			}
			failing = false
		case apierrors.IsConflict(err):
			w.fig.Conflicts++
			stale = true
		default:
			w.fig.WriteErrors++
			if !failing {
				w.cfg.Logf("quorumwatch: write of %d: %v", value+1, err)
			}
			failing, stale = true, true
		}
		w.mu.Unlock()
		if err != nil && !apierrors.IsConflict(err) {
			w.pause(ctx, retryWait)
		}
	}
}

// pause waits d or until ctx ends: the writer's pause before retrying
// after an error, so that an API server that refuses at once is not asked
// in a tight loop.
func (w *Watch) pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// String prints the figures, one a line.
func (f Figures) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "watched %.1f s\n", f.Duration.Seconds())
	fmt.Fprintf(&b, "samples %d (member list unread %d, member statuses unread %d), longest gap between member lists %.0f ms\n",
		f.Samples, f.MemberListErrors, f.StatusErrors, ms(f.LongestGap))
	fmt.Fprintf(&b, "learners at once, most %d; membership changes in flight at once, most %d; removals beside a learner %d\n",
		f.MaxLearners, f.MaxInFlight, f.RemovesBesideLearner)
	fmt.Fprintf(&b, "longest span with fewer than a quorum of voters reporting a leader %.0f ms; leader changes %d; raft term %d -> %d\n",
		ms(f.LongestLeaderless), f.LeaderChanges, f.FirstTerm, f.LastTerm)
	fmt.Fprintf(&b, "writes acknowledged %d, lost %d, errors %d, conflicts %d; last acknowledged %d, read back %d\n",
		f.Acked, f.Lost, f.WriteErrors, f.Conflicts, f.LastAcked, f.ReadBack)
	fmt.Fprintf(&b, "write latency median %.1f ms, max %.1f ms; longest time between acknowledgements %.0f ms\n",
		ms(f.WriteMedian), ms(f.WriteMax), ms(f.LongestWriteGap))
	for _, e := range f.Events {
		fmt.Fprintf(&b, "  %s  %s %s\n", e.At.Format("15:04:05.000"), e.Member, e.Kind)
	}
	return b.String()
}

// Log writes the figures through logf, one a line.
func (f Figures) Log(logf func(format string, args ...any)) {
	for _, line := range strings.Split(strings.TrimRight(f.String(), "\n"), "\n") {
		logf("%s", line)
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
