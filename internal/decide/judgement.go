package decide

import (
	"math"
	"time"

	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/status"
)

// kind is what a judgement judges. Its order is the order of a host's
// reasons in the status.
type kind uint8

const (
	kindEntry         kind = iota // the record is missing or unreadable, or judging it panicked
	kindRecord                    // the record is full or its last write was refused
	kindSamples                   // a full window
	kindFreshness                 // the entry changed recently enough
	kindEtcd                      // a member's etcd metrics were read
	kindLink                      // the default route's interface
	kindConnect                   // TCP connect to a voter's peer port
	kindPeerRTT                   // etcd's own round trip to a peer
	kindWALFsync                  // etcd's WAL fsync
	kindBackendCommit             // etcd's backend commit
	kindFdatasync                 // a non-member's own disk reading
	kindMemory                    // available memory, low tail
	kindStall                     // memory full stall per period
	kindWakeup                    // a timer's largest lateness per period
	kindReadingErrors             // readings that failed, reported only
)

// signalOf is each kind's name in the status (the Signal constants).
var signalOf = [...]string{
	kindEntry: status.SignalEntry, kindRecord: status.SignalRecord, kindSamples: status.SignalSamples, kindFreshness: status.SignalFreshness,
	kindEtcd: status.SignalEtcd, kindLink: status.SignalLink, kindConnect: status.SignalConnect, kindPeerRTT: status.SignalPeerRTT,
	kindWALFsync: status.SignalWALFsync, kindBackendCommit: status.SignalBackendCommit, kindFdatasync: status.SignalFdatasync,
	kindMemory: status.SignalMemory, kindStall: status.SignalStall, kindWakeup: status.SignalWakeup, kindReadingErrors: status.SignalReadingErrors,
}

// isLink: the kind judges the path to another host.
func (k kind) isLink() bool { return k == kindConnect || k == kindPeerRTT }

// isMeasure: the kind is a measured signal, as opposed to the evidence that
// the host can be judged at all; only these have margins and make a host
// unfit.
func (k kind) isMeasure() bool {
	switch k {
	case kindEntry, kindSamples, kindFreshness, kindEtcd, kindReadingErrors:
		return false
	}
	return true
}

// outcome is what one judgement says of its host.
type outcome uint8

const (
	pass    outcome = iota // within its limit, or reported and not held against the host
	fail                   // over its limit, or failed with no number: the host is unfit
	unknown                // the signal cannot be judged: the host is unknown
)

// variant tells apart the forms a kind's judgement takes where the detail
// says different things (a disk reading skipped, failed or taken).
type variant uint8

const (
	vMeasured variant = iota // the figure, judged
	vNone                    // nothing measured in the window
	vFailed                  // the reading failed (an entry's error, a tail of failures)
	vMissing                 // no record (kindEntry)
	vPanic                   // judging panicked (kindEntry)
	vRefused                 // the probe's last write was refused (kindRecord)
	vShrunk                  // the record is full (kindRecord)
	vWifi                    // kindLink's classes
	vWired
	vUnseen
	vSkippedSetting // kindFdatasync: skipped by fsync_skip_reason
	vSkipped        // kindFdatasync: skipped by the probe
	vMemoryFS       // kindFdatasync: taken on a memory filesystem
	vSomeFailed     // kindEtcd: some scrapes failed, judged from the others
	vClaimed        // kindRecord: refused, its etcd member ID is another record's
	vWithheld       // kindRecord: the probe writes no samples, the records unprotected
	vUnprotected    // kindRecord: its marker was seen while the records were unprotected
	vTooFew         // a histogram with no more observations than the window forgives
)

// judgement is one signal of one host judged, before it is words: the
// figure against its limit, the outcome, and the facts its reason's detail
// is written from (render.go). Decide judges every host into judgements,
// plans from them and the link matrix, and renders the reasons last.
type judgement struct {
	kind    kind
	variant variant
	out     outcome
	// measured: value is the figure.
	measured bool
	// bare: the signal has a limit but no figure to judge against it (it
	// was not measured): its reason states only the limit's basis.
	bare bool
	// held: a link judged from its other end (from) that passes here and is
	// held against the measuring host, which does not vote.
	held bool
	// failed and over count a connect tail's connects that failed, and
	// that were over the limit or failed; failed also counts an etcd
	// member's failed scrapes and a window's samples with a failed reading.
	failed, over int
	// subject is the other end of a link (a node name, or "member ID" for a
	// peer etcd knows and no host runs), the directory of a disk reading, or
	// the interface of a link class.
	subject string
	value   float64
	// limit is what the signal is judged against; nil when nothing is (a
	// count of samples reported, a link class: basisOf says why).
	limit *settings.Limit

	// The facts the detail states beyond the figure: how many readings the
	// figure is of; a text from the entry (an error, a filesystem) or the
	// member ID; when a reading was taken or an entry last changed.
	count int
	text  string
	at    time.Time
	// trailingFailed counts a connect tail's latest connects that failed in
	// a row (no answer within the probe's reading timeout).
	trailingFailed int
	// atP is the percentile a histogram's tail was taken at, lower than the
	// tail percentile when the window holds fewer observations than a window
	// holds samples (merged.tail).
	atP float64
	// unmerged is set when some of the window's histograms could not be
	// merged with the others.
	unmerged *unmerged

	// from is set on a link judged from its other end: the measuring host's
	// own judgement of it, whose figure this repeats; the subject is then
	// the measuring host.
	from *judgement
}

// unmerged is how many of a window's histograms could not be merged with
// the others, and the latest merge's error.
type unmerged struct {
	count int
	err   string
}

// failedMeasure: the judgement makes its host unfit.
func (g *judgement) failedMeasure() bool { return g.out == fail && g.kind.isMeasure() }

// failedOwnMeasure: a failed measure of the host's own, not of a link.
func (g *judgement) failedOwnMeasure() bool { return g.failedMeasure() && !g.kind.isLink() }

// figure is the judgement's value against its limit, when it has both.
func (g *judgement) figure() (v, l float64, rule settings.Rule, ok bool) {
	if !g.measured || g.limit == nil || g.bare || g.held {
		return 0, 0, "", false
	}
	return g.value, g.limit.Value, g.limit.Rule, true
}

// headroom is how far the judgement's value is inside its limit, as a
// fraction of the limit: positive inside, negative over, -Inf for a failure
// with no number, +Inf for a judgement with nothing to compare.
func (g *judgement) headroom() float64 {
	v, l, rule, ok := g.figure()
	if !ok {
		if g.out == pass {
			return math.Inf(1)
		}
		return math.Inf(-1)
	}
	return status.Margin(v, l, rule)
}

// judged is a figure judged against l.
func judged(k kind, subject string, l *settings.Limit, v float64) judgement {
	out := fail
	if l.OK(v) {
		out = pass
	}
	return judgement{kind: k, subject: subject, value: v, measured: true, limit: l, out: out}
}

// unmeasuredAs is a judgement with no number, of a signal judged by l (nil
// for one judged by no limit): passing, failing with no number, or making
// the host's verdict unknown.
func unmeasuredAs(k kind, v variant, subject string, l *settings.Limit, out outcome) judgement {
	return judgement{kind: k, variant: v, subject: subject, limit: l, bare: l != nil, out: out}
}

// The bases of the judgements no limit is behind.
const (
	missingBasis       = "every voter and eligible host runs the probe, which keeps one record per host"
	unreadableBasis    = "the record and entry formats of docs/records.md and docs/entry.md"
	panicBasis         = "a host is judged only when judging it completes; a panic is a fault of fleet-role's, reported on the host whose entry caused it and never held against the others"
	recordBasis        = "a record holds at most the largest legitimate entry at these settings (docs/records.md, Capacity); the probe shrinks a larger one and marks a refused write"
	etcdBasis          = "a voter's signals are its etcd's own metrics, scraped every sample"
	linkBasis          = "a default route that leaves by Wi-Fi is unfit: its retransmissions and power saving delay frames past a heartbeat"
	readingErrorsBasis = "reported, not held against the host: each signal is judged from the samples that have it"
	withheldBasis      = "fail closed: a probe writes its samples only while the API server refuses it a write to a record not its own (the admission policy fleet-role-probe-records, checked with a server-side dry run at start and every entry_unchanged); without that refusal any probe could rewrite every record, so none is trusted to stand for its host (docs/records.md, Fail closed)"
	claimedBasis       = "one etcd member, one record: a member ID decides whose round trips are whose, so a record that reports a member ID another member's record already reports is refused, and when no record held it before, every record that reports it (docs/limits.md, One record speaks only for its own host)"
)

// basisOf is the basis of a judgement no limit is behind.
func basisOf(g *judgement) string {
	switch g.kind {
	case kindEntry:
		switch g.variant {
		case vMissing:
			return missingBasis
		case vPanic:
			return panicBasis
		}
		return unreadableBasis
	case kindRecord:
		switch g.variant {
		case vClaimed:
			return claimedBasis
		case vWithheld, vUnprotected:
			return withheldBasis
		}
		return recordBasis
	case kindEtcd:
		return etcdBasis
	case kindLink:
		return linkBasis
	case kindReadingErrors:
		return readingErrorsBasis
	}
	return ""
}

// verdictOf is the verdict of a host's judgements: unknown when any cannot
// be judged, else unfit when any fails.
func verdictOf(gs []judgement) status.Verdict {
	v := status.Fit
	for i := range gs {
		switch gs[i].out {
		case unknown:
			if gs[i].kind.ofRecord() {
				return status.Unknown
			}
			if v == status.Fit {
				v = status.Unknown
			}
		case fail:
			v = status.Unfit
		}
	}
	return v
}

// ofRecord: the kind judges whether the record can be judged at all (it is
// there and readable, holds a full window, and is fresh). When it cannot,
// the host is unknown whatever its samples say: a stale record's last
// samples may look healthy or not, and say nothing of now. When it can, a
// signal over its limit makes the host unfit even if another reading
// failed: a reading that failed cannot vouch for the host, and one over its
// limit speaks against it (a starved host's probe reads its own etcd too
// late to scrape it, and its own timer fires a second late).
func (k kind) ofRecord() bool {
	switch k {
	case kindEntry, kindRecord, kindSamples, kindFreshness:
		return true
	}
	return false
}

// deciding is the index in h.all, and so in the host's reasons, of the
// judgement that decides its verdict: when unknown, the first that cannot be
// judged, one of the record's own before any other (verdictOf: those make
// the host unknown whatever else fails); the one furthest over its limit
// when unfit; the measured one closest to its limit when fit (ties: the
// first in reason order). -1 when there is none (a fit host with nothing
// measured against a limit).
func (h *host) deciding() int {
	best, bestH := -1, 0.0
	if h.verdict == status.Unknown {
		for i := range h.all {
			if g := &h.all[i]; g.out == unknown && g.kind.ofRecord() {
				return i
			}
		}
	}
	for i := range h.all {
		g := &h.all[i]
		var candidate bool
		switch h.verdict {
		case status.Unknown:
			if g.out == unknown {
				return i
			}
		case status.Unfit:
			candidate = g.out == fail
		default:
			_, _, _, figure := g.figure()
			candidate = figure && g.kind.isMeasure()
		}
		if candidate && (best < 0 || g.headroom() < bestH) {
			best, bestH = i, g.headroom()
		}
	}
	return best
}

// minHeadroom is the tightest headroom among gs that pass keep.
func minHeadroom(gs []judgement, keep func(*judgement) bool) float64 {
	m := math.Inf(1)
	for i := range gs {
		if keep(&gs[i]) {
			m = math.Min(m, gs[i].headroom())
		}
	}
	return m
}
