package decide

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/fleet-role/fleet-role/internal/quantile"
	"github.com/fleet-role/fleet-role/internal/record"
	"github.com/fleet-role/fleet-role/internal/status"
)

// The reasons are written last, from the judgements: the decision compares
// figures and outcomes, and only what it publishes (and the few places its
// own reasons quote a host's) is put into words.

// reasons renders the host's judgements as its reasons, in order.
func (h *host) reasons(j *limits) []status.Reason {
	out := make([]status.Reason, len(h.all))
	for i := range h.all {
		out[i] = h.all[i].reason(j, h.node.Name)
	}
	return out
}

// reason renders g as the reason of node's host.
func (g *judgement) reason(j *limits, node string) status.Reason {
	r, _ := g.render(j, node)
	return r
}

// render writes g's reason, and the brief of its detail: the detail
// without the texts taken from the entry, which is what the other end of a
// link repeats (empty where the detail holds no such text).
func (g *judgement) render(j *limits, node string) (r status.Reason, brief string) {
	if g.from != nil {
		return g.fromOtherEnd(j), ""
	}
	r = status.Reason{Signal: signalOf[g.kind], Code: g.code(), Subject: g.subject, OK: g.out == pass}
	switch {
	case g.limit != nil && !g.bare:
		r.Limit, r.Unit, r.Rule, r.Basis = num(g.limit.Value), g.limit.Unit, g.limit.Rule, g.limit.Basis
	case g.limit != nil:
		r.Basis = g.limit.Basis
	case g.measured:
		// A figure judged against no limit is a count of samples reported
		// (failed scrapes, failed readings).
		r.Unit, r.Basis = "samples", basisOf(g)
	default:
		r.Basis = basisOf(g)
	}
	if g.measured {
		r.Value = num(g.value)
	}
	if g.kind == kindFreshness {
		r.Detail, r.Since = g.freshness(j), g.at
	} else {
		r.Detail, brief = g.detail(j, node)
	}
	if u := g.unmerged; u != nil {
		r.Detail += fmt.Sprintf("; %d of the window's histograms could not be merged with the others, the latest: %s: not judged on part of the window",
			u.count, u.err)
	}
	return r, brief
}

// fromOtherEnd renders a link measured by the host at its other end (the
// subject) on this host: the measuring host's numbers, not its entry's
// error texts, which stay in its own reason.
func (g *judgement) fromOtherEnd(j *limits) status.Reason {
	by := g.subject
	r, brief := g.from.render(j, by)
	r.Subject = by
	detail := cmp.Or(brief, r.Detail)
	if brief != "" && brief != r.Detail {
		detail += " (the latest error is in " + by + "'s reasons)"
	}
	r.Detail = "measured by " + by + ": " + detail
	// Its code says whose measurement it is; OK says how it came out.
	r.Code = status.CodeMeasuredByOther
	if g.held {
		r.Value, r.Limit, r.OK, r.Code = nil, nil, true, status.CodeHeldAgainstBy
		r.Detail += "; held against " + by + ", which does not vote, not against this voter, whose paths to the other voters decide"
	}
	return r
}

// detail says what g found; brief is set for a connect tail (render).
func (g *judgement) detail(j *limits, node string) (detail, brief string) {
	s := j.s
	l := g.limit
	// must is how the limit ends a sentence: ", must be at most 25ms".
	must := func() string {
		return ", must be " + status.RuleWord(l.Rule) + " " + status.FormatValue(l.Value, l.Unit)
	}
	switch g.kind {
	case kindEntry:
		switch g.variant {
		case vMissing:
			return fmt.Sprintf("no probe record for this host (ConfigMap %s/%s)", s.RecordsNamespace(), record.Name(node)), ""
		case vPanic:
			return "judging this host's entry panicked: " + g.text, ""
		}
		return "record cannot be read: " + g.text, ""
	case kindRecord:
		if g.variant == vWithheld {
			return "withheld: the probe writes no samples: " + g.text, ""
		}
		if g.variant == vUnprotected {
			return "withheld: its record was a withheld marker while the records were unprotected" + g.text +
				": its samples may be another probe's, and are not judged until every probe has written its samples again with the admission policy in force", ""
		}
		if g.variant == vClaimed {
			return "refused by the decision: " + g.text + ": none of its readings is judged", ""
		}
		if g.variant == vRefused {
			return "refused: the API server refused the probe's last write of its window: " + g.text, ""
		}
		return fmt.Sprintf("full: the %d oldest samples were left out so that the record fits its cap", g.count), ""
	case kindSamples:
		return strconv.Itoa(int(g.value)) + " of " + strconv.Itoa(s.Window) + " samples", ""
	case kindEtcd:
		if g.variant == vNone {
			return fmt.Sprintf("no etcd metrics read in the window (%d scrapes failed, the latest: %s)", g.failed, orDash(g.text)), ""
		}
		return fmt.Sprintf("%d of %d scrapes failed, the latest: %s; judged from the others", g.failed, g.failed+g.count, g.text), ""
	case kindLink:
		switch g.variant {
		case vWifi:
			return fmt.Sprintf("the default route leaves by %s, a Wi-Fi interface", g.subject), ""
		case vWired:
			return "the default route leaves by " + g.subject + ", wired", ""
		}
		return fmt.Sprintf("the link of %s cannot be seen: reported, not held against the host", orDash(g.subject)), ""
	case kindConnect:
		if g.variant == vNone {
			return "no connect to this voter's peer port in the window: reported, not held against the host", ""
		}
		head := "p" + j.pn + " of " + strconv.Itoa(g.count) + " connects to " + g.subject + "'s peer port: "
		if g.variant == vFailed {
			head += "failed"
		} else {
			head += status.FormatValue(g.value, l.Unit) + j.connectMust
		}
		if g.failed == 0 {
			return head, head
		}
		fails := "; " + strconv.Itoa(g.failed) + " of " + strconv.Itoa(g.count) + " failed"
		return head + fails + ", the latest: " + g.text, head + fails
	case kindPeerRTT:
		if g.variant == vTooFew {
			return fmt.Sprintf("%s to %s (member %s) in the window: too few to judge%s", counted(g.count, "round trip"), g.subject, g.text, forgives(j)), ""
		}
		if !g.measured {
			return fmt.Sprintf("no round trips to %s (member %s) in the histograms merged", g.subject, g.text), ""
		}
		return fmt.Sprintf("p%s of %d round trips to %s (member %s): %s", j.pn, g.count, g.subject, g.text, status.FormatValue(g.value, l.Unit)) + must() + g.fewer(j), ""
	case kindWALFsync, kindBackendCommit:
		what := "fsyncs"
		if g.kind == kindBackendCommit {
			what = "commits"
		}
		switch g.variant {
		case vNone:
			return "no " + what + " observed in the window: reported, not held against the host", ""
		case vTooFew:
			return counted(g.count, strings.TrimSuffix(what, "s")) + " in the window: too few to judge" + forgives(j), ""
		}
		return "p" + j.pn + " of " + strconv.Itoa(g.count) + " " + what + " in the window: " + status.FormatValue(g.value, l.Unit) + must() + g.fewer(j), ""
	case kindFdatasync:
		switch g.variant {
		case vSkippedSetting:
			return "no disk measured: " + s.FsyncSkipReason, ""
		case vNone:
			return "no disk reading yet (the probe takes one per window)", ""
		case vSkipped:
			return "no disk measured: " + g.text, ""
		case vFailed:
			return "the disk reading failed: " + g.text, ""
		case vMemoryFS:
			return fmt.Sprintf("no disk measured: %s is on %s, a memory filesystem where fdatasync does nothing", g.subject, orDash(g.text)), ""
		}
		return "p99 of " + strconv.Itoa(g.count) + " fdatasyncs in " + g.subject + " (" + orDash(g.text) + ") at " + g.at.UTC().Format(time.RFC3339) +
			": " + status.FormatValue(g.value, l.Unit) + must(), ""
	case kindMemory:
		if g.variant == vNone {
			return "memory could not be read in any sample of the window", ""
		}
		return "low tail (rank " + strconv.Itoa(quantile.Rank(s.TailPercentile, g.count)) + " of " + strconv.Itoa(g.count) +
			" from the top) of available memory: " + status.FormatValue(g.value, l.Unit) + must(), ""
	case kindStall:
		if g.variant == vNone {
			return "no memory pressure (PSI) figures on this host: reported, not held against it", ""
		}
		rank, note := perSampleRank(j, g.count)
		return rank + " periods' memory full stall" + note + ": " + status.FormatValue(g.value, l.Unit) + must(), ""
	case kindWakeup:
		if g.variant == vNone {
			return "no wake-up readings in the window (a probe that does not take them): reported, not held against the host", ""
		}
		rank, note := perSampleRank(j, g.count)
		return rank + " periods' largest lateness of a timer due every heartbeat interval (" +
			status.FormatValue(s.HeartbeatInterval.Seconds(), l.Unit) + ")" + note + ": " + status.FormatValue(g.value, l.Unit) + " late" + must() +
			"; " + strconv.Itoa(g.over) + " of " + strconv.Itoa(g.count) + " over", ""
	case kindReadingErrors:
		return fmt.Sprintf("%d of %d samples had a reading fail, the latest: %s", g.failed, g.count, g.text), ""
	}
	return "", ""
}

// perSampleRank names the rank a per-sample tail was taken at among count
// values (quantile.HighForgiving): the tail percentile, or, among fewer
// values than the window holds samples, the rank that forgives as many
// samples as the window does, which note says.
func perSampleRank(j *limits, count int) (rank, note string) {
	if count <= j.forgiven || quantile.Rank(j.s.TailPercentile, count) <= count-j.forgiven {
		return "p" + j.pn + " of " + strconv.Itoa(count), ""
	}
	return "the " + ordinal(count-j.forgiven) + " of " + strconv.Itoa(count), " (forgiving " + counted(j.forgiven, "sample") + " as the window does)"
}

// fewer says that a histogram's tail was taken below the tail percentile,
// among fewer observations than a window holds samples (merged.tail).
func (g *judgement) fewer(j *limits) string {
	if g.atP == 0 || g.atP >= j.s.TailPercentile {
		return ""
	}
	return fmt.Sprintf(" (taken at the %s of %d: among fewer observations than a window's %d samples, the tail forgives %s as the window forgives %s)",
		ordinal(g.count-j.forgiven), g.count, j.s.Window, counted(j.forgiven, "observation"), counted(j.forgiven, "sample"))
}

// forgives ends the detail of a histogram with too few observations.
func forgives(j *limits) string {
	return ", the tail forgives " + counted(j.forgiven, "observation") + " as the window forgives " + counted(j.forgiven, "sample") +
		": reported, not held against the host"
}

// counted writes n things, with the plural's s when n is not 1.
func counted(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return strconv.Itoa(n) + " " + thing + "s"
}

// ordinal writes 1 as "1st", 2 as "2nd".
func ordinal(n int) string {
	suffix := "th"
	switch {
	case n%100 >= 11 && n%100 <= 13:
	case n%10 == 1:
		suffix = "st"
	case n%10 == 2:
		suffix = "nd"
	case n%10 == 3:
		suffix = "rd"
	}
	return strconv.Itoa(n) + suffix
}

// freshness is the freshness judgement's detail. It states an age: the
// fingerprint compares the time it counts from (Reason.Since), which the
// observation holds, and the outcome.
func (g *judgement) freshness(j *limits) string {
	d := "entry last seen changing " + j.now.Sub(g.at).Round(time.Millisecond).String() + " ago, at " + g.at.Format(time.RFC3339)
	if g.out != pass {
		d += ": the probe has stopped reporting"
	}
	return d
}

// quoting sets r's detail to prefix and q's detail, as a decision's reason
// quotes a host's, and with it the age q's detail states, if any.
func quoting(r status.Reason, prefix string, q status.Reason) status.Reason {
	r.Detail, r.Since = prefix+q.Detail, q.Since
	return r
}
