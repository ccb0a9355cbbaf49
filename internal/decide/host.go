package decide

import (
	"crypto/sha256"
	"encoding/hex"
	"math"
	"time"

	"github.com/fleet-role/fleet-role/internal/entry"
	"github.com/fleet-role/fleet-role/internal/k3snode"
	"github.com/fleet-role/fleet-role/internal/quantile"
	"github.com/fleet-role/fleet-role/internal/record"
	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/status"
)

// limits are the settings and the limits every host of a decision is judged
// by, derived once a decision rather than once a reason (each derivation
// formats its basis), and the scratch column the reasons' quantiles read.
type limits struct {
	s settings.Settings
	// now is the decision's time, which ages are stated against.
	now                                                             time.Time
	window, stale, connect, rtt, wal, backend, fsync, stall, wakeup settings.Limit
	// pn names the tail percentile ("99"); connectMust is the connect
	// limit as it ends a sentence (", must be at most 25ms").
	pn, connectMust string
	// forgiven is the samples a full window's tail forgives: window -
	// rank(p, window). etcd's histograms forgive as many observations
	// (merged.tail).
	forgiven int
	// values is reused by each column judged in turn: Decide judges one
	// host after another, and a quantile reads its column only while its
	// reason is made.
	values []float64
	// dec reads every entry in turn: the etcd members' first, kept, with
	// only their decoding's scratch in its memory; then those of the hosts
	// whose windows are let go once they are judged, each into the memory
	// of the one before.
	dec entry.Decoder
	// read is the limits entries are decoded with: the window's, or those
	// of Input.ReadWindow while a shrunk window is taken up.
	read entry.Limits
	// unprotected names the hosts whose samples are not trusted, their
	// marker seen while the records were unprotected (protection.go), and
	// since is when the records were last seen so.
	unprotected map[string]bool
	since       time.Time
	// protection is this decision's latch, for its gate.
	protection protection
}

func limitsOf(s settings.Settings, now time.Time) *limits {
	l := &limits{s: s, now: now, window: s.WindowLimit(), stale: s.StaleAfter(), connect: s.ConnectLimit(), rtt: s.RTTLimit(),
		wal: s.WALFsyncLimit(), backend: s.BackendCommitLimit(), fsync: s.FdatasyncLimit(), stall: s.StallLimit(), wakeup: s.WakeupLimit(),
		pn: settings.PercentileName(s.TailPercentile), forgiven: s.Window - quantile.Rank(s.TailPercentile, s.Window)}
	l.connectMust = ", must be " + status.RuleWord(l.connect.Rule) + " " + status.FormatValue(l.connect.Value, l.connect.Unit)
	return l
}

// column is the scratch column, emptied, with room for n values.
func (l *limits) column(n int) []float64 {
	if cap(l.values) < n {
		l.values = make([]float64, 0, n)
	}
	return l.values[:0]
}

// host is one host while a decision is made.
type host struct {
	node     k3snode.Node
	role     status.Role
	raw      string
	hasEntry bool
	entry    entry.Entry
	// merged is an etcd member's window of etcd samples, merged as soon as
	// its entry is read (its histograms are then dropped); nil otherwise.
	merged *etcdWindow
	// window is the samples judged: the entry's last Window samples; let go
	// once the host is judged. samples is its length.
	window []entry.Sample
	// connects is the window's connects by voter, aligned with window.
	connects map[string]*entry.Connects
	samples  int
	// etcd is what the host's etcd said of itself in its latest sample
	// read; nil when none was.
	etcd *etcdState
	// lateMost is the largest lateness of a wake-up in the window judged,
	// seconds (0 when none): what etcd's round trips to the host may carry
	// (lateMember).
	lateMost float64
	// memLimit is the host's own memory limit (its etcd's quota), which its
	// memory judgement points to.
	memLimit settings.Limit
	// wasRead: the entry was decoded, into entry (decoded) or readErr.
	wasRead bool
	readErr error
	decoded bool
	// withheld: the entry is a probe's withheld marker (the records
	// unprotected, protection.go).
	withheld bool
	obs      *status.Observation
	// own is what the host's own entry says, judged, in reason order;
	// all adds the links that hosts at their other ends measured and that
	// count against this one (links.go). all is own when there are none.
	own, all []judgement
	// judged: the entry was read, is fresh and holds a full window, so the
	// host's measurements count, also against the hosts at their other ends.
	judged  bool
	verdict status.Verdict
}

// etcdState is what a member's etcd said of itself at its latest sample
// read, and over its window whether it ever had no leader or fewer
// connected peers: the gates and the members' map read it once the window
// is gone.
type etcdState struct {
	memberID                       string
	isLearner, hasLeader, isLeader bool
	// noSpace: the latest sample's database is at its quota, where etcd
	// raises its NOSPACE alarm and refuses writes.
	noSpace                    bool
	connectedPeers, knownPeers int
	// leaderless counts the window's samples in which the member reported no
	// leader, the latest at leaderlessAt; fewestPeers is the fewest peers
	// it was connected to at any sample of the window, at fewestAt.
	leaderless             int
	leaderlessAt           time.Time
	fewestPeers            int
	fewestAt               time.Time
	windowRead, windowSize int
}

// etcdStateOf is the member's state from its window's etcd samples; nil
// when none was read.
func etcdStateOf(window []entry.Sample) *etcdState {
	var st *etcdState
	for i := range window {
		x := window[i].Etcd
		if x == nil || x.Err != "" {
			continue
		}
		if st == nil {
			st = &etcdState{fewestPeers: x.ConnectedPeers, fewestAt: window[i].At}
		}
		st.memberID, st.isLearner, st.hasLeader, st.isLeader = x.MemberID, x.IsLearner, x.HasLeader, x.IsLeader
		st.noSpace = x.QuotaBytes > 0 && x.DBSizeBytes >= x.QuotaBytes
		st.connectedPeers, st.knownPeers = x.ConnectedPeers, x.KnownPeers
		st.windowRead++
		if !x.HasLeader {
			st.leaderless++
			st.leaderlessAt = window[i].At
		}
		if x.ConnectedPeers <= st.fewestPeers {
			st.fewestPeers, st.fewestAt = x.ConnectedPeers, window[i].At
		}
	}
	if st != nil {
		st.windowSize = len(window)
	}
	return st
}

// Digest identifies an entry's raw text in the status's observations.
func Digest(raw string) string {
	// Through a buffer on the stack: []byte(raw) would copy every entry
	// each decision.
	h := sha256.New()
	var buf [4096]byte
	for len(raw) > 0 {
		n := copy(buf[:], raw)
		h.Write(buf[:n])
		raw = raw[n:]
	}
	return hex.EncodeToString(h.Sum(nil))
}

func roleOf(n k3snode.Node, latest *etcdState) status.Role {
	switch {
	case n.Voter && (n.Learner || latest != nil && latest.isLearner):
		return status.RoleLearner
	case n.Voter:
		return status.RoleVoter
	case n.Eligible:
		return status.RoleStandby
	}
	return status.RoleOther
}

// isMember: the host runs an etcd member, so its disks and round trips are
// etcd's own metrics.
func (h *host) isMember() bool { return h.role == status.RoleVoter || h.role == status.RoleLearner }

// evidence judges whether the host can be judged at all.
func (h *host) evidence(j *limits, now time.Time, decodeErr error) {
	s := j.s
	if !h.hasEntry {
		h.own = append(h.own, unmeasuredAs(kindEntry, vMissing, "", nil, unknown))
		return
	}
	if decodeErr != nil {
		g := unmeasuredAs(kindEntry, vFailed, "", nil, unknown)
		g.text = status.Clip(decodeErr.Error())
		h.own = append(h.own, g)
		return
	}
	if g, ok := h.recordState(s); ok {
		h.own = append(h.own, g)
	}
	n := len(h.window)
	samples := judged(kindSamples, "", &j.window, float64(n))
	freshness := judged(kindFreshness, "", &j.stale, now.Sub(h.obs.ChangedAt).Seconds())
	freshness.at = h.obs.ChangedAt
	h.judged = samples.out == pass && freshness.out == pass
	// Too few samples or a stale entry is not a host over a limit: it is
	// a host that cannot be judged.
	for _, g := range []*judgement{&samples, &freshness} {
		if g.out == fail {
			g.out = unknown
		}
	}
	h.own = append(h.own, samples, freshness)
}

// recordState says why a record holds less than the probe's window: full
// (the probe left its oldest samples out to fit the cap) or refused (the API
// server refused the probe's last write). Either is why such a host has no
// full, fresh window, and is named as such rather than as a host that
// stopped reporting.
func (h *host) recordState(s settings.Settings) (judgement, bool) {
	switch {
	case h.entry.Refused != "":
		g := unmeasuredAs(kindRecord, vRefused, "", nil, unknown)
		g.text = status.Clip(h.entry.Refused)
		return g, true
	case h.entry.Shrunk > 0:
		l := &settings.Limit{Value: float64(record.CapBytes(s.Window, s.MaxServers)), Unit: "bytes", Rule: settings.AtMost, Basis: recordBasis}
		return judgement{kind: kindRecord, variant: vShrunk, value: float64(len(h.raw)), measured: true, limit: l,
			out: unknown, count: h.entry.Shrunk}, true
	}
	return judgement{}, false
}

// measure judges every signal of a decoded entry. voters are the nodes the
// host connects to; members maps etcd member IDs to node names.
func (h *host) measure(j *limits, voters []string, members map[string]string) {
	w := h.window
	if len(w) == 0 {
		return
	}
	last := w[len(w)-1]
	h.own = append(h.own, linkClass(last.Link))
	for _, v := range voters {
		if v != h.node.Name {
			h.own = append(h.own, connectTail(j, h.connects[v], v))
		}
	}
	if h.isMember() {
		h.own = h.etcdSignals(j, members, h.own)
	} else {
		h.own = append(h.own, h.fdatasync(j))
	}
	h.own = append(h.own, h.memory(j), stallTail(j, w), wakeupTail(j, w))
	for i := range w {
		if x := w[i].WakeupLateSeconds; x != nil {
			h.lateMost = max(h.lateMost, *x)
		}
	}
	var failed int
	var lastErr string
	for _, x := range w {
		if len(x.Errors) > 0 {
			failed++
			lastErr = status.Clip(x.Errors[len(x.Errors)-1])
		}
	}
	if failed > 0 {
		h.own = append(h.own, judgement{kind: kindReadingErrors, value: float64(failed), measured: true, out: pass,
			failed: failed, count: len(w), text: lastErr})
	}
}

// linkClass judges the class of the default route's interface.
func linkClass(l entry.Link) judgement {
	iface := status.Clip(l.Interface)
	switch l.Class {
	case entry.ClassWifi:
		return unmeasuredAs(kindLink, vWifi, iface, nil, fail)
	case entry.ClassWired:
		return unmeasuredAs(kindLink, vWired, iface, nil, pass)
	}
	return unmeasuredAs(kindLink, vUnseen, iface, nil, pass)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// connectTail judges the connects to voter over the window. A failed
// connect counts as over the limit: it sorts above every time. A tail of
// failures has the value +Inf and is not measured: there is no time to
// show.
func connectTail(j *limits, col *entry.Connects, voter string) judgement {
	s, l := j.s, &j.connect
	if col == nil {
		col = &entry.Connects{}
	}
	values := j.column(len(col.At))
	failed, over := 0, 0
	var lastErr string
	trailing := 0
	for i, at := range col.At {
		if !at {
			continue
		}
		c := col.Connect[i]
		if c.Err != "" {
			trailing++
		} else {
			trailing = 0
		}
		if c.Err != "" {
			failed++
			over++
			lastErr = c.Err
			values = append(values, math.Inf(1))
			continue
		}
		if !l.OK(c.Seconds) {
			over++
		}
		values = append(values, c.Seconds)
	}
	if len(values) == 0 {
		return unmeasuredAs(kindConnect, vNone, voter, l, pass)
	}
	// One question of this column: its tail is selected, not sorted.
	v, _ := quantile.High(values, s.TailPercentile)
	g := judged(kindConnect, voter, l, v)
	if math.IsInf(v, 1) {
		g.variant, g.measured = vFailed, false
	}
	g.count, g.failed, g.over, g.text = len(values), failed, over, status.Clip(lastErr)
	g.trailingFailed = trailing
	return g
}

// etcdWindow is a member's etcd samples over its window: the histograms
// merged, the scrapes read and failed, and the histograms that could not be
// merged.
type etcdWindow struct {
	wal, backend  merged
	rtt           map[string]*merged
	read, failed  int
	lastErr, self string
}

// merged is one histogram merged over a window, and the samples whose
// histogram could not be merged with it.
type merged struct {
	quantile.Histogram
	unmerged int
	lastErr  string
}

// tail is the merged histogram's p-tail, forgiving at least forgiven
// observations, as the window's tail forgives forgiven samples: with n
// observations, no higher than the rank n - forgiven. Among as many
// observations as a window holds samples (or more) that is the p-quantile
// itself; among fewer, the p-quantile would be their largest, and one late
// observation would turn the tail. etcd feeds its peer round-trip histogram
// about twice every 30 s (docs/facts.md), so a short window holds a few
// round trips, each a smoothed average that may still carry a delay that
// has ended. With no more observations than that, nothing is judged: few
// reports how many there were. at is the percentile the tail was taken at.
func (m *merged) tail(p float64, forgiven int) (v float64, at float64, ok, few bool) {
	n := m.Count()
	if n == 0 {
		return 0, p, false, false
	}
	if n <= uint64(forgiven) {
		return 0, p, false, true
	}
	at = p
	if q := float64(n-uint64(forgiven)) / float64(n); q < at {
		at = q
	}
	v, ok = m.Quantile(at)
	return v, at, ok, false
}

func (m *merged) add(g quantile.Histogram) {
	if err := m.Add(g); err != nil {
		m.unmerged++
		m.lastErr = status.Clip(err.Error())
	}
}

// mergeEtcd merges the etcd samples of a window. Bounds are one set per
// entry (docs/entry.md), so a merge cannot fail on a decoded entry; should
// one fail, the signal says so and is not judged on the rest (etcdSignals).
func mergeEtcd(window []entry.Sample) *etcdWindow {
	w := &etcdWindow{rtt: map[string]*merged{}}
	for _, x := range window {
		e := x.Etcd
		if e == nil {
			continue
		}
		if e.Err != "" {
			w.failed++
			w.lastErr = status.Clip(e.Err)
			continue
		}
		w.read++
		w.self = e.MemberID
		w.wal.add(e.WALFsync)
		w.backend.add(e.BackendCommit)
		for id, g := range e.PeerRTT {
			m := w.rtt[id]
			if m == nil {
				m = &merged{}
				w.rtt[id] = m
			}
			m.add(g)
		}
	}
	return w
}

// etcdSignals judges a member's own metrics, appended to out: its round
// trips to every peer and its disks, from the window's merged histogram
// deltas (merged when the entry was read, or now).
func (h *host) etcdSignals(j *limits, members map[string]string, out []judgement) []judgement {
	s := j.s
	m := h.merged
	if m == nil {
		m = mergeEtcd(h.window)
	}
	if m.read == 0 {
		g := unmeasuredAs(kindEtcd, vNone, "", nil, unknown)
		g.failed, g.text = m.failed, m.lastErr
		return append(out, g)
	}
	if m.failed > 0 {
		out = append(out, judgement{kind: kindEtcd, variant: vSomeFailed, value: float64(m.failed), measured: true,
			out: pass, failed: m.failed, count: m.read, text: m.lastErr})
	}
	for _, id := range sortedKeys(m.rtt) {
		if id == m.self {
			continue
		}
		g := m.rtt[id]
		v, at, ok, few := g.tail(s.TailPercentile, j.forgiven)
		if !ok && !few && g.unmerged == 0 {
			continue
		}
		subject := members[id]
		shown := status.Clip(id)
		if subject == "" {
			subject = "member " + shown
		}
		r := judged(kindPeerRTT, subject, &j.rtt, v)
		r.measured, r.atP = ok, at
		r.count, r.text = int(g.Count()), shown
		if few {
			r.variant, r.out = vTooFew, pass
		}
		out = append(out, r.unmergedBy(g))
	}
	return append(out, histTail(j, &j.wal, kindWALFsync, &m.wal),
		histTail(j, &j.backend, kindBackendCommit, &m.backend))
}

// unmergedBy makes g unknown when some of the window's histograms could
// not be merged: a tail of part of the window would be judged as the
// whole's. Its figure stays, for what it is worth.
func (g judgement) unmergedBy(m *merged) judgement {
	if m.unmerged > 0 {
		g.out, g.unmerged = unknown, &unmerged{count: m.unmerged, err: m.lastErr}
	}
	return g
}

func histTail(j *limits, l *settings.Limit, k kind, m *merged) judgement {
	v, at, ok, few := m.tail(j.s.TailPercentile, j.forgiven)
	g := unmeasuredAs(k, vNone, "", l, pass)
	switch {
	case ok:
		g = judged(k, "", l, v)
		g.count, g.atP = int(m.Count()), at
	case few:
		g.variant, g.count = vTooFew, int(m.Count())
	}
	return g.unmergedBy(m)
}

// fdatasync judges a non-member's own disk reading. A reading not taken on
// a disk says why and is not held against the host.
func (h *host) fdatasync(j *limits) judgement {
	s, l := j.s, &j.fsync
	f := h.entry.Fsync
	switch {
	case f == nil && s.FsyncSkipReason != "":
		return unmeasuredAs(kindFdatasync, vSkippedSetting, "", l, pass)
	case f == nil:
		return unmeasuredAs(kindFdatasync, vNone, "", l, unknown)
	}
	dir := status.Clip(f.Dir)
	var g judgement
	switch {
	case f.Skipped != "":
		g = unmeasuredAs(kindFdatasync, vSkipped, dir, l, pass)
		g.text = status.Clip(f.Skipped)
	case f.Err != "":
		g = unmeasuredAs(kindFdatasync, vFailed, dir, l, unknown)
		g.text = status.Clip(f.Err)
	case !f.MeasuredDisk:
		g = unmeasuredAs(kindFdatasync, vMemoryFS, dir, l, pass)
		g.text = status.Clip(f.Filesystem)
	default:
		g = judged(kindFdatasync, dir, l, f.P99Seconds)
		g.count, g.text, g.at = f.Writes, status.Clip(f.Filesystem), f.At
	}
	return g
}

// memory judges the low tail of available memory against the storage quota
// etcd reports for a member, else the setting.
func (h *host) memory(j *limits) judgement {
	s := j.s
	values := j.column(len(h.window))
	for _, x := range h.window {
		if x.MemTotalBytes > 0 {
			values = append(values, float64(x.MemAvailableBytes))
		}
	}
	quota, fromEtcd := s.StorageQuotaBytes, false
	if h.isMember() {
		for i := len(h.window) - 1; i >= 0; i-- {
			if x := h.window[i].Etcd; x != nil && x.Err == "" && x.QuotaBytes > 0 {
				quota, fromEtcd = x.QuotaBytes, true
				break
			}
		}
	}
	h.memLimit = s.MemoryLimit(quota, fromEtcd)
	l := &h.memLimit
	if len(values) == 0 {
		return unmeasuredAs(kindMemory, vNone, "", l, unknown)
	}
	v, _ := quantile.Low(values, s.TailPercentile)
	g := judged(kindMemory, "", l, v)
	g.count = len(values)
	return g
}

// stallTail judges the memory full-stall time gained per sample period.
func stallTail(j *limits, w []entry.Sample) judgement {
	return perSampleTail(j, w, kindStall, &j.stall, func(x *entry.Sample) *float64 { return x.MemFullStallSeconds })
}

// wakeupTail judges the largest lateness of the probe's timer per sample
// period: how late the host ran it.
func wakeupTail(j *limits, w []entry.Sample) judgement {
	return perSampleTail(j, w, kindWakeup, &j.wakeup, func(x *entry.Sample) *float64 { return x.WakeupLateSeconds })
}

// perSampleTail judges the nearest-rank p-tail of a figure each sample may
// have (of) against l. Samples without it are left out; a window with none
// is reported, not held against the host (no PSI, a probe that takes no
// wake-up reading). over counts the samples over the limit.
func perSampleTail(j *limits, w []entry.Sample, k kind, l *settings.Limit, of func(*entry.Sample) *float64) judgement {
	values := j.column(len(w))
	over := 0
	for i := range w {
		if v := of(&w[i]); v != nil {
			values = append(values, *v)
			if !l.OK(*v) {
				over++
			}
		}
	}
	if len(values) == 0 {
		return unmeasuredAs(k, vNone, "", l, pass)
	}
	// A sample may lack the figure (the first after a stall takes no
	// wake-up: the late one is counted at the next); the tail still
	// forgives as many samples as the full window's does.
	v, _ := quantile.HighForgiving(values, j.s.TailPercentile, j.forgiven)
	g := judged(k, "", l, v)
	g.count, g.over = len(values), over
	return g
}

// clipEntry cuts every text of a decoded entry to TextCap as soon as it is
// read, so that a decision holds no more of an entry's texts than it can
// report, however long the entry's texts are. Link classes are compared,
// not reported, and map keys are names the decision looks up.
func clipEntry(e *entry.Entry, connects map[string]*entry.Connects) {
	cut := map[string]string{} // one cut per distinct text: the entry refers to its texts many times
	c := func(s string) string {
		if len(s) <= status.TextCap {
			return s
		}
		if x, ok := cut[s]; ok {
			return x
		}
		cut[s] = status.Clip(s)
		return cut[s]
	}
	for _, col := range connects {
		for i := range col.Connect {
			if len(col.Connect[i].Err) > status.TextCap {
				col.Connect[i].Err = c(col.Connect[i].Err)
			}
		}
	}
	for i := range e.Samples {
		x := &e.Samples[i]
		x.Link.Interface = c(x.Link.Interface)
		for k, v := range x.Connect {
			if len(v.Err) > status.TextCap {
				v.Err = c(v.Err)
				x.Connect[k] = v
			}
		}
		for j := range x.Errors {
			x.Errors[j] = c(x.Errors[j])
		}
		if x.Etcd != nil {
			x.Etcd.MemberID, x.Etcd.Err = c(x.Etcd.MemberID), c(x.Etcd.Err)
		}
	}
	if f := e.Fsync; f != nil {
		f.Dir, f.Filesystem, f.Err, f.Skipped = c(f.Dir), c(f.Filesystem), c(f.Err), c(f.Skipped)
	}
}

// member is the host's etcd member as its latest sample read says; nil when
// none was read or the record was refused its member (trust.go).
func (h *host) member() *status.Member {
	x := h.etcd
	if x == nil || x.memberID == "" {
		return nil
	}
	return &status.Member{ID: x.memberID, Leader: x.isLeader, Learner: x.isLearner, HasLeader: x.hasLeader, NoSpace: x.noSpace,
		KnownMembers: x.knownPeers + 1}
}
