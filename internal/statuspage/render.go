package statuspage

import (
	"bufio"
	"fmt"
	"html"
	"io"
	"time"
	"unicode/utf8"

	"github.com/fleet-role/fleet-role/internal/status"
)

// Page is one rendering: a decision's model, the verdicts of the decisions
// before it when the controller remembers them, and where it came from.
type Page struct {
	Model *Model
	// History is nil for a page written from saved inputs, which hold one
	// decision, or from a status document that carries none (PageOf).
	History *History
	// Source says where the decision came from, for the page's header.
	Source string
	// Refresh, when set, has the browser load the page again that often
	// (a meta refresh: no script, which the policy forbids); a page
	// written to a file, of one decision, has none.
	Refresh time.Duration
	// Gap, when set, marks in the history where two decisions came more
	// than Gap apart. The controller decides twice a period, so it sets a
	// period: more than one apart means a decision was missed.
	Gap time.Duration
}

// PageOf is the page of a published status document: its decision, and the
// history it carries (the controller's page's, as it was when it wrote the
// document), gaps marked at its sample period. A history that does not read
// is left out, and the page says it was written from one decision.
func PageOf(st *status.Status, source string) Page {
	p := Page{Model: ModelOf(st), Source: source}
	if st.History != nil {
		if h, err := ImportHistory(len(st.History.TimesMS), st.History); err == nil {
			p.History, p.Gap = h, st.Settings.Values.SamplePeriod
		}
	}
	return p
}

// ContentSecurityPolicy is what the page may load: nothing but its own
// inline style. The controller sends it as a header; the page carries it
// in a meta element too, so that a copy opened from a file holds to it.
const ContentSecurityPolicy = "default-src 'none'; style-src 'unsafe-inline'; img-src 'none'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'"

// TextRunes is the most characters of one text the page shows in a cell:
// a reason's detail can quote an entry's error text, up to status.TextCap
// bytes; the page shows its start and says it was cut, and `fleet-role
// status HOST` prints it whole. It bounds what each host adds to the page
// whatever its record holds (docs/operators.md, "Size").
const TextRunes = 200

// TimeLayout is how the page writes the decision's time: to the
// millisecond, which tells apart decisions half a period apart.
const TimeLayout = "2006-01-02T15:04:05.000Z07:00"

// The page is written by hand, every text from a decision through esc
// (html.EscapeString: <, >, &, ' and " become references, which is all a
// text in an element or a quoted attribute needs; the page has no script,
// URL or style built from data, the contexts html/template tells apart).
// Not with html/template: its executing templates through reflection keeps
// every exported method of every type the binary links, which cost 8.7 MB
// of executable and 2.5 MiB of resident memory at start (measured, against
// 28.7 MB and 17.4 MiB), in the probe on every node too, as the product
// binary is one.
var esc = html.EscapeString

// head is the page up to its title: fixed, with the policy that lets the
// page load nothing but its own style.
const head = `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src 'none'; form-action 'none'; base-uri 'none'">
<meta name="viewport" content="width=device-width">
`

const style = `<style>
body{font:14px/1.4 system-ui,sans-serif;margin:1em 2em;color:#1f2328;background:#fff}
h1{font-size:1.3em}h2{font-size:1.1em;margin-top:1.5em}
table{border-collapse:collapse}th,td{border:1px solid #d0d7de;padding:2px 6px;text-align:left;vertical-align:top}
th{background:#f6f8fa}td.n{text-align:right;font-variant-numeric:tabular-nums}
.ok{background:#dafbe1;color:#116329}.bad{background:#ffebe9;color:#a40e26;font-weight:bold}
.unk{background:#fff8c5;color:#7d4e00}.none,.self{color:#656d76}.self{background:#f6f8fa}
.fail{background:repeating-linear-gradient(45deg,#ffebe9,#ffebe9 4px,#ffd8d3 4px,#ffd8d3 8px);color:#a40e26;font-weight:bold}
.big{font-size:2em;font-weight:bold;margin:0}.hist{font-family:ui-monospace,monospace;white-space:pre;letter-spacing:1px}
.hist span.bad,.hist span.unk{font-weight:bold}small{color:#656d76}.nw{white-space:nowrap}
</style></head><body>
`

// Render writes the page.
func Render(w io.Writer, p Page) error {
	if p.Model == nil {
		return fmt.Errorf("render status page: no decision")
	}
	bw := bufio.NewWriter(w)
	write(bw, p)
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write status page: %w", err)
	}
	return nil
}

// write writes the page to b; a bufio.Writer keeps its first error, which
// Flush returns.
func write(b *bufio.Writer, p Page) {
	m := p.Model
	pr := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	str := b.WriteString
	d, t := m.Decision, m.Tolerance
	swap := d.Action == status.ActionSwap

	str(head)
	if secs := int((p.Refresh + time.Second - 1) / time.Second); secs > 0 {
		pr("<meta http-equiv=\"refresh\" content=\"%d\">\n", secs)
	}
	str("<title>fleet-role: ")
	if swap {
		pr("swap %s out for %s", esc(d.Out), esc(d.In))
	} else {
		str("no swap")
	}
	pr(", failure tolerance %d</title>\n", t.Attributed)
	str(style)
	str("<h1>fleet-role ")
	if swap {
		pr("would swap <b>%s</b> out for <b>%s</b>", esc(d.Out), esc(d.In))
	} else {
		str("would make no swap")
	}
	str(" <small>(dry run: nothing is changed)</small></h1>\n")
	pr(`<p id="meta">decided at <time id="generated-at">%s</time> · %s · form <b>%s</b>`, m.GeneratedAt.UTC().Format(TimeLayout), esc(p.Source), esc(m.Form))
	for _, x := range m.Dropped {
		pr(" (dropped %d %s)", x.Count, esc(x.Part))
	}
	if m.Version != "" {
		pr(` · fleet-role <span id="version">%s</span>`, esc(m.Version))
	}
	pr(" · period %s, window %d, tail p%s</p>\n", m.Settings.SamplePeriod, m.Settings.Window, esc(m.Percentile))
	// The step that decides: the voter out and why, or what holds the swap.
	if r, ok := d.DecidingStep(); ok {
		what := "Held back by step"
		if swap {
			what = "Why this voter: step"
		}
		pr(`<p id="deciding-step">%s <b>%s</b>: %s</p>`+"\n", what, esc(r.Signal), esc(cut(r.Detail, DecisionRunes)))
	}

	mark, class := "✓", "ok"
	if t.Attributed == 0 {
		mark, class = "✗", "bad"
	}
	// The attributed figure first: the voters unfit only by their links to
	// an implicated voter hold sound votes (status.FailureTolerance).
	pr(`<section id="tolerance"><h2>Failure tolerance</h2>`+"\n"+`<p class="big %s"><span id="tolerance-value">%d</span> %s</p>`+"\n", class, t.Attributed, mark)
	pr(`<p>%s. Counting every unfit voter as lost: <b id="tolerance-strict">%d</b>; only the unknown voters: <b id="tolerance-optimistic">%d</b>; by the voter count alone: %d.</p></section>`+"\n",
		esc(t.Sentence()), t.Tolerance, t.OptimisticTolerance, t.DesignTolerance)

	writeTiming(b, m.Timing)

	pr(`<section id="hosts"><h2>Hosts (%d)</h2>`+"\n", len(m.Hosts))
	str("<table><tr><th>host</th><th>role</th><th>verdict</th><th>samples</th><th>deciding reason: value against its limit</th></tr>")
	for _, h := range m.Hosts {
		pr("\n<tr><th scope=\"row\">%s</th><td>%s", esc(h.Name), esc(string(h.Role)))
		if h.Pinned {
			str(", pinned")
		}
		if h.Eligible && h.Role != status.RoleStandby {
			str(", eligible")
		}
		why := "-"
		if h.Deciding != nil {
			why = short(status.Summary(*h.Deciding))
		}
		verdict := verdictMark(h.Verdict)
		if len(h.UnfitByLinksTo) > 0 {
			verdict = verdictSymbol(h.Verdict) + " " + status.VerdictText(status.Host{Verdict: h.Verdict, UnfitByLinksTo: h.UnfitByLinksTo})
		}
		pr(`</td><td class="%s">%s</td><td class="n">%d/%d</td><td>%s</td></tr>`, verdictClass(h.Verdict), esc(verdict), h.Samples, m.Settings.Window, esc(why))
	}
	str("</table></section>\n")

	str(`<section id="links"><h2>Link matrix</h2>` + "\n")
	pr("<p>Each row is the host that measured, each column the etcd member it connected to. A cell is the p%s of the window's TCP connects to the member's peer port (limit %s, %s) and, on a member's row, etcd's own peer round trip, <i>rtt</i> (limit %s): ✓ within its limit, ✗ over it, <b>✗ failed</b> the connects at the tail failed (and how many of the window's failed), ? not judged, · none no reading in the window. A link is slow when either is over its limit; the tooltip says each reading in words.",
		esc(m.Percentile), status.FormatValue(m.Connect.Value, "seconds"), esc(string(m.Connect.Rule)), status.FormatValue(m.RTT.Value, "seconds"))
	switch {
	case m.Matrix.Missing:
		str(" <b>This status document has no link matrix (it was written by a fleet-role before the status published one).</b>")
	case m.Matrix.Dropped > 0:
		pr(" <b>This document's form (%s) left %d link cells out: a row without readings may have had some.</b>", esc(m.Form), m.Matrix.Dropped)
	}
	str("</p>\n<table id=\"link-matrix\"><tr><th>measured by \\ to</th>")
	for _, peer := range m.Matrix.Peers {
		pr(`<th scope="col">%s</th>`, esc(peer))
	}
	str("</tr>")
	for _, r := range m.Matrix.Rows {
		// The row's colour is its host's verdict, so the verdict's mark
		// follows the name (the mark, not the colour, carries it).
		pr("\n<tr><th scope=\"row\" class=\"%s\">%s %s</th>", verdictClass(r.Verdict), esc(r.Host), verdictSymbol(r.Verdict))
		if r.Note != "" {
			pr(`<td colspan="%d" class="none">· %s</td></tr>`, len(r.Cells), esc(short(r.Note)))
			continue
		}
		for _, c := range r.Cells {
			if c.Self {
				str(`<td class="self">self</td>`)
				continue
			}
			class := c.Connect.class()
			if rc := c.RTT.class(); (rc == "bad" || rc == "unk") && rc != class {
				class += " " + rc
			}
			title := c.Connect.title("connects", m.Percentile, m.Connect)
			if t := c.RTT.title("round trips", m.Percentile, m.RTT); t != "" {
				title += "; etcd's " + t
			}
			pr(`<td class="%s"`, class)
			if title != "" {
				pr(` title="%s"`, esc(title))
			}
			pr(">%s", esc(c.Connect.mark()))
			if c.RTT.Present {
				pr("<br>rtt %s", esc(c.RTT.mark()))
			}
			str("</td>")
		}
		str("</tr>")
	}
	str("</table></section>\n")

	str(`<section id="decision"><h2>Decision: `)
	if swap {
		pr("swap %s out, %s in", esc(d.Out), esc(d.In))
	} else {
		str("none")
	}
	str("</h2>\n<table><tr><th></th><th>step</th><th>subject</th><th>why</th></tr>")
	for i, r := range d.Reasons {
		class, mark := "ok", "✓ ok"
		switch {
		case d.Deciding != nil && *d.Deciding == i && r.OK:
			mark = "✓ decides"
		case d.Deciding != nil && *d.Deciding == i:
			class, mark = "bad", "✗ holds, first"
		case r.OK:
		case r.Code.Candidacy():
			class, mark = "bad", "✗ not fit"
		default:
			class, mark = "bad", "✗ holds"
		}
		pr("\n<tr class=\"%s\"><td class=\"nw\">%s</td><td>%s</td><td>%s</td><td>%s</td></tr>", class, mark, esc(r.Signal), esc(r.Subject), esc(cut(r.Detail, DecisionRunes)))
	}
	str("</table></section>\n")

	str(`<section id="history"><h2>Verdicts over the last decisions</h2>` + "\n")
	if p.History == nil {
		str("<p>This page was written from one decision; the controller's own page (its metrics port, path /status) shows the verdicts of the decisions it remembers.</p>")
	} else {
		oldest, newest := p.History.Span()
		pr("<p>Oldest on the left, one mark a decision (%d remembered, from %s to %s UTC): F fit, U unfit, ? unknown, - not listed.",
			p.History.Len(), oldest.UTC().Format(rulerLayout), newest.UTC().Format(rulerLayout))
		if p.Gap > 0 {
			pr(" %s where more than %v passed between two decisions: the controller decided nothing for a while (it restarted, failed over, or was starved of CPU).", gapMark, p.Gap)
		}
		str("</p>\n<table>")
		pr(`<tr><th scope="row">UTC</th><td class="hist"><small>%s</small></td></tr>`, p.History.Ruler(p.Gap))
		for _, h := range m.Hosts {
			pr(`<tr><th scope="row">%s</th><td class="hist">`, esc(h.Name))
			for _, c := range p.History.Cells(h.Name, p.Gap) {
				pr(`<span class="%s">%s</span>`, c.Class, c.Text)
			}
			str("</td></tr>")
		}
		str("</table>")
	}
	str("</section>\n</body></html>\n")
}

// DecisionRunes is the most characters of a decision step's detail the page
// shows: the decision's own sentences (the attribution names every slow
// link and the sets that explain them) run longer than a host's, and there
// are only as many steps as the plan has and a candidate per standby.
const DecisionRunes = 1000

// short cuts a text to TextRunes characters, saying so.
func short(s string) string { return cut(s, TextRunes) }

func cut(s string, most int) string {
	if utf8.RuneCountInString(s) <= most {
		return s
	}
	n := 0
	for i := range s {
		if n == most {
			return s[:i] + fmt.Sprintf("… [cut from %d bytes; fleet-role status HOST prints it whole]", len(s))
		}
		n++
	}
	return s
}

// verdictMark is a verdict with its mark, so that it reads without colour.
func verdictMark(v status.Verdict) string {
	if v == "" {
		return verdictSymbol(v)
	}
	return verdictSymbol(v) + " " + string(v)
}

// verdictSymbol is a verdict's mark alone: ✓ fit, ✗ unfit, ? otherwise.
func verdictSymbol(v status.Verdict) string {
	switch v {
	case status.Fit:
		return "✓"
	case status.Unfit:
		return "✗"
	}
	return "?"
}

func verdictClass(v status.Verdict) string {
	switch v {
	case status.Fit:
		return "ok"
	case status.Unfit:
		return "bad"
	}
	return "unk"
}

// writeTiming writes the timing advice: the cluster's heartbeat and
// election timeout beside what the voters' readings call for, and the k3s
// lines that set it when they fall short (status.Timing).
func writeTiming(b *bufio.Writer, t status.Timing) {
	if t.Verdict == "" {
		return // a document from before the advice
	}
	class, mark := "ok", "✓"
	switch t.Verdict {
	case status.TimingRaise, status.TimingBeyondEtcd:
		class, mark = "bad", "✗"
	case status.TimingUnmeasured:
		class, mark = "unk", "?"
	}
	fmt.Fprintf(b, `<section id="timing"><h2>Timing</h2>`+"\n"+`<p class="%s" id="timing-verdict">%s %s</p>`+"\n", class, mark, esc(string(t.Verdict)))
	if t.Verdict != status.TimingUnmeasured {
		fmt.Fprintf(b, `<table><tr><th></th><th>the cluster's</th><th>called for</th></tr>`+
			`<tr><th scope="row">heartbeat interval</th><td class="n">%d ms</td><td class="n" id="timing-heartbeat">%d ms</td></tr>`+
			`<tr><th scope="row">election timeout</th><td class="n">%d ms</td><td class="n" id="timing-election">%d ms</td></tr></table>`+"\n",
			t.CurrentHeartbeatMs, t.HeartbeatMs, t.CurrentElectionMs, t.ElectionMs)
	}
	fmt.Fprintf(b, "<p>%s.</p>\n", esc(t.Sentence()))
	if len(t.EtcdArgs) > 0 {
		b.WriteString(`<p>In /etc/rancher/k3s/config.yaml on every server, then restart k3s one server at a time:</p><pre id="timing-args">etcd-arg:` + "\n")
		for _, a := range t.EtcdArgs {
			fmt.Fprintf(b, "  - %s\n", esc(a))
		}
		b.WriteString("</pre>\n")
	}
	b.WriteString("</section>\n")
}
