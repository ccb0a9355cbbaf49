package decide

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/fleet-role/fleet-role/internal/entry"
	"github.com/fleet-role/fleet-role/internal/quantile"
	"github.com/fleet-role/fleet-role/internal/record"
	"github.com/fleet-role/fleet-role/internal/settings"
)

// limits are the settings and the limits every host of a decision is judged
// by, derived once a decision rather than once a reason (each derivation
// formats its basis), and the scratch column the reasons' quantiles read.
type limits struct {
	s                                                       settings.Settings
	window, stale, connect, rtt, wal, backend, fsync, stall settings.Limit
	// pn names the tail percentile ("99"); connectMust is the connect
	// limit as it ends a sentence (", must be at most 25ms").
	pn, connectMust string
	// values is reused by each column judged in turn: Decide judges one
	// host after another, and a quantile reads its column only while its
	// reason is made.
	values []float64
	// dec reads every entry in turn: the etcd members' first, kept, with
	// only their decoding's scratch in its memory; then those of the hosts
	// whose windows are let go once they are judged, each into the memory
	// of the one before.
	dec entry.Decoder
}

func limitsOf(s settings.Settings) *limits {
	l := &limits{s: s, window: s.WindowLimit(), stale: s.StaleAfter(), connect: s.ConnectLimit(), rtt: s.RTTLimit(),
		wal: s.WALFsyncLimit(), backend: s.BackendCommitLimit(), fsync: s.FdatasyncLimit(), stall: s.StallLimit(),
		pn: settings.PercentileName(s.TailPercentile)}
	l.connectMust = ", must be " + ruleWord(l.connect.Rule) + " " + FormatValue(l.connect.Value, l.connect.Unit)
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
	node     Node
	role     Role
	raw      string
	hasEntry bool
	entry    entry.Entry
	// merged is an etcd member's window of etcd samples, merged as soon as
	// its entry is read (its histograms are then dropped); nil otherwise.
	merged *etcdWindow
	// window is the samples judged: the entry's last Window samples; let go
	// once the host is judged unless it is an etcd member. samples is its
	// length.
	window []entry.Sample
	// connects is the window's connects by voter, aligned with window.
	connects map[string]*entry.Connects
	samples  int
	// wasRead: the entry was decoded, into entry (decoded) or readErr.
	wasRead bool
	readErr error
	decoded bool
	obs     *Observation
	reasons []Reason
	// judged: the entry was read, is fresh and holds a full window, so the
	// host's measurements count, also against the hosts at their other ends.
	judged  bool
	verdict Verdict
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

func roleOf(n Node, latest *entry.EtcdSample) Role {
	switch {
	case n.Voter && (n.Learner || latest != nil && latest.IsLearner):
		return RoleLearner
	case n.Voter:
		return RoleVoter
	case n.Eligible:
		return RoleStandby
	}
	return RoleOther
}

// latestEtcd is the host's newest etcd sample that was read, or nil.
func latestEtcd(samples []entry.Sample) *entry.EtcdSample {
	for i := len(samples) - 1; i >= 0; i-- {
		if x := samples[i].Etcd; x != nil && x.Err == "" {
			return x
		}
	}
	return nil
}

// isMember: the host runs an etcd member, so its disks and round trips are
// etcd's own metrics.
func (h *host) isMember() bool { return h.role == RoleVoter || h.role == RoleLearner }

// evidence judges whether the host can be judged at all.
func (h *host) evidence(j *limits, now time.Time, decodeErr error) {
	s := j.s
	if !h.hasEntry {
		h.reasons = append(h.reasons, unmeasured(SignalEntry, "", "every voter and eligible host runs the probe, which keeps one record per host",
			fmt.Sprintf("no probe record for this host (ConfigMap %s/%s)", s.Namespace, record.Name(h.node.Name)), false))
		return
	}
	if decodeErr != nil {
		h.reasons = append(h.reasons, unmeasured(SignalEntry, "", "the record and entry formats of docs/records.md and docs/entry.md",
			"record cannot be read: "+clip(decodeErr.Error()), false))
		return
	}
	if r, ok := h.recordReason(s); ok {
		h.reasons = append(h.reasons, r)
	}
	n := len(h.window)
	r := against(j.window, SignalSamples, "", float64(n), strconv.Itoa(n)+" of "+strconv.Itoa(s.Window)+" samples")
	r.unknown = !r.OK
	h.reasons = append(h.reasons, r)
	age := now.Sub(h.obs.ChangedAt)
	r = against(j.stale, SignalFreshness, "", age.Seconds(),
		"entry last seen changing "+age.Round(time.Millisecond).String()+" ago, at "+h.obs.ChangedAt.Format(time.RFC3339))
	r.unknown = !r.OK
	if !r.OK {
		r.Detail += ": the probe has stopped reporting"
	}
	h.reasons = append(h.reasons, r)
	h.judged = h.reasons[len(h.reasons)-1].OK && h.reasons[len(h.reasons)-2].OK
}

// recordReason says why a record holds less than the probe's window: full
// (the probe left its oldest samples out to fit the cap) or refused (the API
// server refused the probe's last write). Either is why such a host has no
// full, fresh window, and is named as such rather than as a host that
// stopped reporting.
func (h *host) recordReason(s settings.Settings) (Reason, bool) {
	limit := record.CapBytes(s.Window, s.MaxServers)
	const basis = "a record holds at most the largest legitimate entry at these settings (docs/records.md, Capacity); the probe shrinks a larger one and marks a refused write"
	switch {
	case h.entry.Refused != "":
		return unmeasured(SignalRecord, "", basis,
			"refused: the API server refused the probe's last write of its window: "+clip(h.entry.Refused), false), true
	case h.entry.Shrunk > 0:
		r := Reason{Signal: SignalRecord, Value: num(float64(len(h.raw))), Limit: num(float64(limit)), Unit: "bytes",
			Rule: settings.AtMost, Basis: basis, OK: false, unknown: true,
			Detail: fmt.Sprintf("full: the %d oldest samples were left out so that the record fits its cap", h.entry.Shrunk)}
		return r, true
	}
	return Reason{}, false
}

// measure judges every signal of a decoded entry. voters are the nodes the
// host connects to; members maps etcd member IDs to node names.
func (h *host) measure(j *limits, voters []string, members map[string]string) {
	w := h.window
	if len(w) == 0 {
		return
	}
	last := w[len(w)-1]
	h.reasons = append(h.reasons, h.link(last.Link))
	for _, v := range voters {
		if v != h.node.Name {
			h.reasons = append(h.reasons, connectReason(j, h.connects[v], v))
		}
	}
	if h.isMember() {
		h.reasons = append(h.reasons, h.etcd(j, members)...)
	} else {
		h.reasons = append(h.reasons, h.fdatasync(j))
	}
	h.reasons = append(h.reasons, h.memory(j), stallReason(j, w))
	var failed int
	var lastErr string
	for _, x := range w {
		if len(x.Errors) > 0 {
			failed++
			lastErr = clip(x.Errors[len(x.Errors)-1])
		}
	}
	if failed > 0 {
		h.reasons = append(h.reasons, Reason{Signal: SignalReadingErrors, Value: num(float64(failed)), Unit: "samples",
			Basis: "reported, not held against the host: each signal is judged from the samples that have it", OK: true,
			Detail: fmt.Sprintf("%d of %d samples had a reading fail, the latest: %s", failed, len(w), lastErr)})
	}
}

func (h *host) link(l entry.Link) Reason {
	l.Interface = clip(l.Interface)
	const basis = "a default route that leaves by Wi-Fi is unfit: its retransmissions and power saving delay frames past a heartbeat"
	switch l.Class {
	case entry.ClassWifi:
		return unfitNoNumber(SignalLink, l.Interface, basis, fmt.Sprintf("the default route leaves by %s, a Wi-Fi interface", l.Interface))
	case entry.ClassWired:
		return unmeasured(SignalLink, l.Interface, basis, "the default route leaves by "+l.Interface+", wired", true)
	}
	return unmeasured(SignalLink, l.Interface, basis, fmt.Sprintf("the link of %s cannot be seen: reported, not held against the host", orDash(l.Interface)), true)
}

// unfitNoNumber is a failed reason with no number that makes a host unfit.
func unfitNoNumber(signal, subject, basis, detail string) Reason {
	return Reason{Signal: signal, Subject: subject, Basis: basis, Detail: detail}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// connectReason judges the connects to voter over the window. A failed
// connect counts as over the limit: it sorts above every time.
func connectReason(j *limits, col *entry.Connects, voter string) Reason {
	s, l := j.s, j.connect
	if col == nil {
		col = &entry.Connects{}
	}
	values := j.column(len(col.At))
	failed := 0
	var lastErr string
	for i, at := range col.At {
		if !at {
			continue
		}
		c := col.Connect[i]
		if c.Err != "" {
			failed++
			lastErr = clip(c.Err)
			values = append(values, math.Inf(1))
			continue
		}
		values = append(values, c.Seconds)
	}
	if len(values) == 0 {
		return unmeasured(SignalConnect, voter, l.Basis, "no connect to this voter's peer port in the window: reported, not held against the host", true)
	}
	// One question of this column: its tail is selected, not sorted.
	v, _ := quantile.High(values, s.TailPercentile)
	pn := j.pn
	// brief is the detail without the entry's error text, for the copy of
	// the reason on the voter's side of the link.
	fails, briefFails := "", ""
	if failed > 0 {
		briefFails = "; " + strconv.Itoa(failed) + " of " + strconv.Itoa(len(values)) + " failed"
		fails = briefFails + ", the latest: " + lastErr
	}
	var r Reason
	var head string
	if math.IsInf(v, 1) {
		head = "p" + pn + " of " + strconv.Itoa(len(values)) + " connects to " + voter + "'s peer port: failed"
		r = Reason{Signal: SignalConnect, Subject: voter, Limit: num(l.Value), Unit: l.Unit, Rule: l.Rule, Basis: l.Basis}
	} else {
		head = "p" + pn + " of " + strconv.Itoa(len(values)) + " connects to " + voter + "'s peer port: " + FormatValue(v, l.Unit) + j.connectMust
		r = against(l, SignalConnect, voter, v, "")
	}
	r.Detail, r.brief = head+fails, head+briefFails
	return r
}

// etcdWindow is a member's etcd samples over its window: the histograms
// merged, the scrapes read and failed.
type etcdWindow struct {
	wal, backend  quantile.Histogram
	rtt           map[string]*quantile.Histogram
	read, failed  int
	lastErr, self string
}

// mergeEtcd merges the etcd samples of a window.
func mergeEtcd(window []entry.Sample) *etcdWindow {
	w := &etcdWindow{rtt: map[string]*quantile.Histogram{}}
	for _, x := range window {
		e := x.Etcd
		if e == nil {
			continue
		}
		if e.Err != "" {
			w.failed++
			w.lastErr = clip(e.Err)
			continue
		}
		w.read++
		w.self = e.MemberID
		// Bounds are one set per entry (docs/entry.md), so a merge cannot
		// fail on a decoded entry; a histogram that does is left out.
		_ = w.wal.Add(e.WALFsync)
		_ = w.backend.Add(e.BackendCommit)
		for id, g := range e.PeerRTT {
			m := w.rtt[id]
			if m == nil {
				m = &quantile.Histogram{}
				w.rtt[id] = m
			}
			_ = m.Add(g)
		}
	}
	return w
}

// etcd judges a member's own metrics: its round trips to every peer and its
// disks, from the window's merged histogram deltas (merged when the entry
// was read, or now).
func (h *host) etcd(j *limits, members map[string]string) []Reason {
	s := j.s
	m := h.merged
	if m == nil {
		m = mergeEtcd(h.window)
	}
	wal, backend, rtt, read, failed, lastErr, self := m.wal, m.backend, m.rtt, m.read, m.failed, m.lastErr, m.self
	basis := "a voter's signals are its etcd's own metrics, scraped every sample"
	if read == 0 {
		return []Reason{unmeasured(SignalEtcd, "", basis,
			fmt.Sprintf("no etcd metrics read in the window (%d scrapes failed, the latest: %s)", failed, orDash(lastErr)), false)}
	}
	var out []Reason
	if failed > 0 {
		out = append(out, Reason{Signal: SignalEtcd, Value: num(float64(failed)), Unit: "samples", Basis: basis, OK: true,
			Detail: fmt.Sprintf("%d of %d scrapes failed, the latest: %s; judged from the others", failed, failed+read, lastErr)})
	}
	pn := j.pn
	for _, id := range sortedKeys(rtt) {
		if id == self {
			continue
		}
		g := rtt[id]
		v, ok := g.Quantile(s.TailPercentile)
		if !ok {
			continue
		}
		subject := members[id]
		shown := clip(id)
		if subject == "" {
			subject = "member " + shown
		}
		l := j.rtt
		out = append(out, against(l, SignalPeerRTT, subject, v, fmt.Sprintf("p%s of %d round trips to %s (member %s): %s, must be %s %s",
			pn, g.Count(), subject, shown, FormatValue(v, l.Unit), ruleWord(l.Rule), FormatValue(l.Value, l.Unit))))
	}
	out = append(out, histReason(j.wal, SignalWALFsync, "fsyncs", wal, s.TailPercentile),
		histReason(j.backend, SignalBackendCommit, "commits", backend, s.TailPercentile))
	return out
}

func histReason(l settings.Limit, signal, what string, g quantile.Histogram, p float64) Reason {
	v, ok := g.Quantile(p)
	if !ok {
		return unmeasured(signal, "", l.Basis, "no "+what+" observed in the window: reported, not held against the host", true)
	}
	return against(l, signal, "", v, "p"+settings.PercentileName(p)+" of "+strconv.FormatUint(g.Count(), 10)+" "+what+" in the window: "+
		FormatValue(v, l.Unit)+", must be "+ruleWord(l.Rule)+" "+FormatValue(l.Value, l.Unit))
}

// fdatasync judges a non-voter's own disk reading. A reading not taken on a
// disk says why and is not held against the host.
func (h *host) fdatasync(j *limits) Reason {
	s, l := j.s, j.fsync
	f := h.entry.Fsync
	if f != nil {
		c := *f
		c.Dir, c.Filesystem, c.Skipped, c.Err = clip(c.Dir), clip(c.Filesystem), clip(c.Skipped), clip(c.Err)
		f = &c
	}
	switch {
	case f == nil && s.FsyncSkipReason != "":
		return unmeasured(SignalFdatasync, "", l.Basis, "no disk measured: "+s.FsyncSkipReason, true)
	case f == nil:
		return unmeasured(SignalFdatasync, "", l.Basis, "no disk reading yet (the probe takes one per window)", false)
	case f.Skipped != "":
		return unmeasured(SignalFdatasync, f.Dir, l.Basis, "no disk measured: "+f.Skipped, true)
	case f.Err != "":
		return unmeasured(SignalFdatasync, f.Dir, l.Basis, "the disk reading failed: "+f.Err, false)
	case !f.MeasuredDisk:
		return unmeasured(SignalFdatasync, f.Dir, l.Basis,
			fmt.Sprintf("no disk measured: %s is on %s, a memory filesystem where fdatasync does nothing", f.Dir, orDash(f.Filesystem)), true)
	}
	return against(l, SignalFdatasync, f.Dir, f.P99Seconds, fmt.Sprintf("p99 of %d fdatasyncs in %s (%s) at %s: %s, must be %s %s",
		f.Writes, f.Dir, orDash(f.Filesystem), f.At.UTC().Format(time.RFC3339), FormatValue(f.P99Seconds, l.Unit), ruleWord(l.Rule), FormatValue(l.Value, l.Unit)))
}

// memory judges the low tail of available memory against the storage quota
// etcd reports for a member, else the setting.
func (h *host) memory(j *limits) Reason {
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
	l := s.MemoryLimit(quota, fromEtcd)
	if len(values) == 0 {
		return unmeasured(SignalMemory, "", l.Basis, "memory could not be read in any sample of the window", false)
	}
	v, _ := quantile.Low(values, s.TailPercentile)
	return against(l, SignalMemory, "", v, "low tail (rank "+strconv.Itoa(quantile.Rank(s.TailPercentile, len(values)))+" of "+strconv.Itoa(len(values))+
		" from the top) of available memory: "+FormatValue(v, l.Unit)+", must be "+ruleWord(l.Rule)+" "+FormatValue(l.Value, l.Unit))
}

// stallReason judges the memory full-stall time gained per sample period.
func stallReason(j *limits, w []entry.Sample) Reason {
	s, l := j.s, j.stall
	values := j.column(len(w))
	for _, x := range w {
		if x.MemFullStallSeconds != nil {
			values = append(values, *x.MemFullStallSeconds)
		}
	}
	if len(values) == 0 {
		return unmeasured(SignalStall, "", l.Basis, "no memory pressure (PSI) figures on this host: reported, not held against it", true)
	}
	v, _ := quantile.High(values, s.TailPercentile)
	return against(l, SignalStall, "", v, "p"+j.pn+" of "+strconv.Itoa(len(values))+" periods' memory full stall: "+
		FormatValue(v, l.Unit)+", must be "+ruleWord(l.Rule)+" "+FormatValue(l.Value, l.Unit))
}

// clipEntry cuts every text of a decoded entry to TextCap as soon as it is
// read, so that a decision holds no more of an entry's texts than it can
// report, however long the entry's texts are. Link classes are compared,
// not reported, and map keys are names the decision looks up.
func clipEntry(e *entry.Entry, connects map[string]*entry.Connects) {
	cut := map[string]string{} // one cut per distinct text: the entry refers to its texts many times
	c := func(s string) string {
		if len(s) <= TextCap {
			return s
		}
		if x, ok := cut[s]; ok {
			return x
		}
		cut[s] = clip(s)
		return cut[s]
	}
	for _, col := range connects {
		for i := range col.Connect {
			if len(col.Connect[i].Err) > TextCap {
				col.Connect[i].Err = c(col.Connect[i].Err)
			}
		}
	}
	for i := range e.Samples {
		x := &e.Samples[i]
		x.Link.Interface = c(x.Link.Interface)
		for k, v := range x.Connect {
			if len(v.Err) > TextCap {
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
