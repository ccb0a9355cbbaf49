package statuspage_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"golang.org/x/net/html"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleet-role/fleet-role/internal/decide"
	"github.com/fleet-role/fleet-role/internal/entry"
	"github.com/fleet-role/fleet-role/internal/k3snode"
	"github.com/fleet-role/fleet-role/internal/kube"
	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/status"
	"github.com/fleet-role/fleet-role/internal/statuspage"
	"github.com/fleet-role/fleet-role/lab/kit/testkit"
	"github.com/fleet-role/fleet-role/lab/run/browser"
)

// payload is a record's text crafted as markup and script: shown as
// text, it is harmless; parsed as markup, it would run.
const payload = `</td><script>document.title="owned"</script><img src=x onerror="document.title='owned'"><b title='x'>&amp;`

// fleet decides over three voters and standbys standbys, each recording a
// realistic full window (lab/kit/testkit, the bench's generator); with
// hostile, every standby's disk directory, every connect error to voter-2
// and every reading error is payload, repeated up to the entry's cap.
func fleet(t testing.TB, standbys int, hostile bool) *status.Status {
	t.Helper()
	s := settings.Defaults()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	voters := []string{"voter-1", "voter-2", "voter-3"}
	in := decide.Input{Now: now, Settings: s, Entries: map[string]string{}}
	var nodes []corev1.Node
	text := payload
	if hostile {
		text = strings.Repeat(payload, entry.MaxTextBytes/len(payload))
	}
	for i := range len(voters) + standbys {
		name, self := fmt.Sprintf("standby-%04d.fleet.example.internal", i-len(voters)), -1
		if i < len(voters) {
			name, self = voters[i], i
		}
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{s.EligibleLabel: "true"}}}
		if self >= 0 {
			n.Labels[k3snode.EtcdRoleLabel] = "true"
			n.Status.Conditions = []corev1.NodeCondition{{Type: k3snode.EtcdIsVoterCondition, Status: corev1.ConditionTrue,
				LastTransitionTime: metav1.NewTime(now.Add(-24 * time.Hour))}}
		}
		nodes = append(nodes, n)
		e := testkit.RealisticEntry(name, voters, self, s.Window, s.SamplePeriod, now.Add(-time.Duration(s.Window)*s.SamplePeriod))
		if hostile && self < 0 {
			e.Fsync.Dir = text
			for j := range e.Samples {
				e.Samples[j].Connect["voter-2"] = entry.Connect{Err: text}
				e.Samples[j].Errors = []string{text}
			}
		}
		raw, err := entry.Encode(e)
		if err != nil {
			t.Fatalf("encode %s: %v", name, err)
		}
		in.Entries[name] = raw
	}
	in.Nodes = kube.NodesFromKube(nodes, s)
	// Twice, so that every entry has been seen: the second decision's
	// previous is the first.
	st := decide.Decide(in)
	in.Previous = &st
	st = decide.Decide(in)
	return &st
}

func render(t testing.TB, st *status.Status, h *statuspage.History) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := statuspage.Render(&b, statuspage.Page{Model: statuspage.ModelOf(st), History: h, Source: "test"}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func parse(t testing.TB, page []byte) *html.Node {
	t.Helper()
	doc, err := html.Parse(bytes.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// A record's markup and script are text on the page: no element, no
// attribute, no script comes from them, and the text reads as written.
func TestRecordTextIsEscaped(t *testing.T) {
	st := fleet(t, 4, false)
	// The payload in a standby's disk directory and in voter-2's connect
	// errors, short enough to be shown whole.
	for i := range st.Hosts {
		h := &st.Hosts[i]
		for j := range h.Reasons {
			r := &h.Reasons[j]
			if r.Signal == status.SignalFdatasync {
				r.Subject = payload
			}
		}
	}
	page := render(t, st, nil)
	doc := parse(t, page)
	shown := 0
	browser.Walk(doc, func(n *html.Node) {
		if n.Type != html.ElementNode {
			return
		}
		switch n.Data {
		case "script", "img", "link", "iframe", "object", "embed":
			t.Errorf("the page has a <%s> element", n.Data)
		}
		for _, a := range n.Attr {
			if strings.HasPrefix(a.Key, "on") || a.Key == "src" || a.Key == "href" {
				t.Errorf("<%s> has attribute %s=%q", n.Data, a.Key, a.Val)
			}
		}
		if n.Data == "td" && strings.Contains(browser.Text(n), payload) {
			shown++
		}
	})
	if shown == 0 {
		t.Fatalf("the payload is shown in no cell as text:\n%s", page)
	}
}

// Every coloured cell carries its meaning in text too: a verdict or a
// reading has its mark, and a reading its number.
func TestColourIsNeverAlone(t *testing.T) {
	st := fleet(t, 4, true) // failing connects to voter-2, and every other kind
	page := render(t, st, nil)
	marks := map[string][]string{"ok": {"✓"}, "bad": {"✗", "U"}, "fail": {"✗ failed"}, "unk": {"?"}, "none": {"·", "-", "self"}, "self": {"self"}}
	cells := map[string]int{}
	browser.Walk(parse(t, page), func(n *html.Node) {
		if n.Type != html.ElementNode || (n.Data != "td" && n.Data != "th" && n.Data != "span" && n.Data != "p") {
			return
		}
		class, ok := browser.Attr(n, "class")
		if !ok {
			return
		}
		for _, c := range strings.Fields(class) {
			want, known := marks[c]
			if !known {
				continue
			}
			cells[c]++
			found := false
			for _, m := range want {
				if strings.Contains(browser.Text(n), m) {
					found = true
				}
			}
			if !found {
				t.Errorf("<%s class=%q> %q carries none of the marks %q", n.Data, class, browser.Text(n), want)
			}
		}
	})
	for _, c := range []string{"ok", "bad", "fail", "self"} {
		if cells[c] == 0 {
			t.Errorf("no cell of class %s: the fleet should show one (%v)", c, cells)
		}
	}
}

// The matrix is the status's links laid out: between the golden scenario's
// slow pair, each end's own tail over its limit with etcd's round trip, and
// every other cell the figures the status publishes for it.
func TestMatrixIsTheStatusLinks(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "decide", "testdata", "slow-voter-link", "status.json"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := status.UnmarshalStatus(b)
	if err != nil {
		t.Fatal(err)
	}
	m := statuspage.ModelOf(st).Matrix
	if strings.Join(m.Peers, ",") != "alpha,bravo,charlie" || m.Missing || m.Dropped != 0 {
		t.Fatalf("peers %q, missing %v, dropped %d", m.Peers, m.Missing, m.Dropped)
	}
	want := map[string]status.LinkCell{}
	for _, r := range st.Links {
		for _, c := range r.To {
			want[r.From+">"+c.Peer] = c
		}
	}
	n := 0
	for _, row := range m.Rows {
		for i, c := range row.Cells {
			if c.Self != (row.Host == m.Peers[i]) {
				t.Errorf("%s>%s: self %v", row.Host, m.Peers[i], c.Self)
			}
			w, ok := want[row.Host+">"+m.Peers[i]]
			if !ok {
				if c.Connect.Present || c.RTT.Present {
					t.Errorf("%s>%s: a reading the status does not have", row.Host, m.Peers[i])
				}
				continue
			}
			n++
			if !c.Connect.Present || !c.Connect.HasSeconds || c.Connect.Seconds != *w.Connect.Seconds || c.Connect.OK != w.Connect.OK ||
				c.Connect.Count != w.Connect.Count || c.Connect.Over != w.Connect.Over || c.Slow != w.Slow ||
				(w.RTT != nil) != c.RTT.Present {
				t.Errorf("%s>%s: %+v, the status says %+v %+v", row.Host, m.Peers[i], c, *w.Connect, w.RTT)
			}
		}
	}
	if n != len(want) || n == 0 {
		t.Fatalf("%d cells matched of %d links", n, len(want))
	}
	alpha := m.Rows[0]
	if alpha.Host != "alpha" || alpha.Cells[1].Connect.OK || !alpha.Cells[1].RTT.Present || !alpha.Cells[1].Slow {
		t.Fatalf("alpha's link to bravo: %+v, want over its limit with etcd's round trip", alpha.Cells[1])
	}
	// On the page: marked, its numbers (the status's) and its count over the
	// limit in words.
	ab := want["alpha>bravo"]
	connect, rtt := status.FormatValue(*ab.Connect.Seconds, "seconds"), status.FormatValue(*ab.RTT.Seconds, "seconds")
	var cell *html.Node
	browser.Walk(parse(t, render(t, st, nil)), func(n *html.Node) {
		if title, _ := browser.Attr(n, "title"); n.Data == "td" && cell == nil && strings.Contains(title, "connects: "+connect) {
			cell = n
		}
	})
	if cell == nil {
		t.Fatal("no cell with alpha's connect tail to bravo")
	}
	class, _ := browser.Attr(cell, "class")
	title, _ := browser.Attr(cell, "title")
	if !strings.Contains(class, "bad") || browser.Text(cell) != connect+" ✗rtt "+rtt+" ✗" || !strings.Contains(title, "100 over the limit or failed") {
		t.Fatalf("alpha to bravo: class %q, %q, title %q", class, browser.Text(cell), title)
	}
}

// A document that left link rows out, or has none, says so, and a host
// without its row says why.
func TestMatrixLeftOut(t *testing.T) {
	st := fleet(t, 4, false)
	dropped := 0
	for _, r := range st.Links[3:] {
		dropped += len(r.To)
	}
	reduced := *st
	reduced.Links = st.Links[:3]
	reduced.Dropped = []status.Dropped{{Part: status.PartLinks, Count: dropped}}
	page := string(render(t, &reduced, nil))
	if !strings.Contains(page, fmt.Sprintf("left %d link cells out", dropped)) || !strings.Contains(page, "its links were left out of this document") {
		t.Fatalf("the page does not say what was left out:\n%s", page)
	}
	old := *st
	old.Links = nil
	if page := string(render(t, &old, nil)); !strings.Contains(page, "has no link matrix") {
		t.Fatalf("a document without links:\n%s", page)
	}
}

// A host with no record has its row, which says why it has no readings.
func TestHostWithoutRecordHasARow(t *testing.T) {
	st := fleet(t, 2, false)
	in := decide.Input{Now: st.GeneratedAt, Settings: st.Settings.Values, Nodes: []k3snode.Node{{Name: "voter-4", Voter: true}}}
	lone := decide.Decide(in)
	st.Hosts = append(st.Hosts, lone.Hosts...)
	m := statuspage.ModelOf(st)
	var row *statuspage.MatrixRow
	for i := range m.Matrix.Rows {
		if m.Matrix.Rows[i].Host == "voter-4" {
			row = &m.Matrix.Rows[i]
		}
	}
	if row == nil || !strings.Contains(row.Note, "no probe record") {
		t.Fatalf("voter-4's row: %+v", row)
	}
	if len(m.Matrix.Peers) != 4 {
		t.Fatalf("peers %q: voter-4 has no record but is a column", m.Matrix.Peers)
	}
}

// PageBytesAt500 is the stated bound of docs/operators.md: the page for
// the bench's largest fleet, 500 recording standbys and three voters,
// whatever their records hold.
const PageBytesAt500 = 1 << 20

// The page at 500 recording hosts stays within its bound, with realistic
// records and with every text at its cap and made of markup.
func TestPageSizeAt500Hosts(t *testing.T) {
	for _, hostile := range []bool{false, true} {
		st := fleet(t, 500, hostile)
		// Every decision more than the gap after the one before (a
		// controller starved of CPU), so that every row has a gap mark
		// between every two of its marks: the history's widest rows.
		const gap = time.Second
		h := statuspage.NewHistory(2 * st.Settings.Values.Window)
		for i := range 2 * st.Settings.Values.Window {
			d := *st
			d.GeneratedAt = st.GeneratedAt.Add(time.Duration(i) * 2 * gap)
			h.Add(&d)
		}
		var b bytes.Buffer
		if err := statuspage.Render(&b, statuspage.Page{Model: statuspage.ModelOf(st), History: h, Source: "test", Gap: gap}); err != nil {
			t.Fatal(err)
		}
		page := b.Bytes()
		var row strings.Builder
		for _, c := range h.Cells(st.Hosts[0].Name, gap) {
			row.WriteString(c.Text)
		}
		if marks := strings.Count(row.String(), "┆"); marks != h.Len()-1 {
			t.Fatalf("%s's row marks %d gaps, want one between every two of %d decisions", st.Hosts[0].Name, marks, h.Len())
		}
		t.Logf("hostile=%v: %d hosts, page %d bytes (%.0f per host), bound %d", hostile, len(st.Hosts), len(page), float64(len(page))/float64(len(st.Hosts)), PageBytesAt500)
		if len(page) > PageBytesAt500 {
			t.Errorf("hostile=%v: the page is %d bytes, over the bound of %d", hostile, len(page), PageBytesAt500)
		}
	}
}

func TestHistory(t *testing.T) {
	st := func(verdicts map[string]status.Verdict, at int) *status.Status {
		s := &status.Status{GeneratedAt: time.Unix(int64(at), 0)}
		for _, n := range []string{"a", "b", "c"} {
			if v, ok := verdicts[n]; ok {
				s.Hosts = append(s.Hosts, status.Host{Name: n, Verdict: v})
			}
		}
		return s
	}
	h := statuspage.NewHistory(3)
	h.Add(st(map[string]status.Verdict{"a": status.Fit}, 1))
	h.Add(st(map[string]status.Verdict{"a": status.Fit, "b": status.Unfit}, 2))
	c := h.Clone()
	h.Add(st(map[string]status.Verdict{"a": status.Unknown, "b": status.Unfit}, 3))
	h.Add(st(map[string]status.Verdict{"a": status.Unfit}, 4))
	got := func(h *statuspage.History, host string) string {
		var b strings.Builder
		for _, c := range h.Cells(host, 0) {
			b.WriteString(c.Text)
		}
		return b.String()
	}
	if h.Len() != 3 || got(h, "a") != "F?U" || got(h, "b") != "UU-" {
		t.Fatalf("after 4 decisions of 3 remembered: len %d, a %q, b %q", h.Len(), got(h, "a"), got(h, "b"))
	}
	if c.Len() != 2 || got(c, "a") != "FF" || got(c, "b") != "-U" {
		t.Fatalf("the clone changed: len %d, a %q, b %q", c.Len(), got(c, "a"), got(c, "b"))
	}
	h.Add(st(nil, 5))
	h.Add(st(nil, 6))
	if got(h, "b") != "" {
		t.Fatalf("b, in none of the remembered decisions, is still remembered: %q", got(h, "b"))
	}

	// A new window resizes it: smaller, the oldest go at once, and a host
	// only they listed with them; larger, it fills up to the new size.
	h = statuspage.NewHistory(4)
	h.Add(st(map[string]status.Verdict{"c": status.Fit}, 1))
	h.Add(st(map[string]status.Verdict{"a": status.Fit}, 2))
	h.Add(st(map[string]status.Verdict{"a": status.Unfit}, 3))
	h.Add(st(map[string]status.Verdict{"a": status.Unknown}, 4))
	h.Resize(2)
	if h.Len() != 2 || got(h, "a") != "U?" || got(h, "c") != "" {
		t.Fatalf("resized from 4 to 2: len %d, a %q, c %q; want 2, \"U?\" and c forgotten", h.Len(), got(h, "a"), got(h, "c"))
	}
	h.Resize(3)
	for at := 5; at <= 7; at++ {
		h.Add(st(map[string]status.Verdict{"a": status.Fit}, at))
	}
	if h.Len() != 3 || got(h, "a") != "FFF" {
		t.Fatalf("resized to 3 and three more added: len %d, a %q; want 3 and \"FFF\"", h.Len(), got(h, "a"))
	}
	if oldest, _ := h.Span(); !oldest.Equal(time.Unix(5, 0)) {
		t.Fatalf("the oldest remembered is %v, want the fifth decision's", oldest)
	}
}

// The history as the status carries it and back: the same rows, the same
// ruler and gaps, a host absent from some decisions included; read into a
// smaller size, the newest decisions; a history naming a host twice, or
// whose marks do not add up, is refused.
func TestHistoryExportImport(t *testing.T) {
	st := func(verdicts map[string]status.Verdict, at time.Duration) *status.Status {
		s := &status.Status{GeneratedAt: time.Date(2026, 12, 5, 11, 0, 0, 0, time.UTC).Add(at)}
		for _, n := range []string{"a", "b"} {
			if v, ok := verdicts[n]; ok {
				s.Hosts = append(s.Hosts, status.Host{Name: n, Verdict: v})
			}
		}
		return s
	}
	h := statuspage.NewHistory(10)
	h.Add(st(map[string]status.Verdict{"a": status.Fit}, 0))
	h.Add(st(map[string]status.Verdict{"a": status.Fit, "b": status.Unknown}, 500*time.Millisecond))
	h.Add(st(map[string]status.Verdict{"a": status.Unfit, "b": status.Fit}, 5*time.Second)) // a gap
	h.Add(st(map[string]status.Verdict{"a": status.Unfit}, 5500*time.Millisecond))
	rows := func(h *statuspage.History) string {
		var b strings.Builder
		b.WriteString(h.Ruler(time.Second))
		for _, host := range []string{"a", "b"} {
			b.WriteString("|")
			for _, c := range h.Cells(host, time.Second) {
				b.WriteString(c.Class + ":" + c.Text + " ")
			}
		}
		return b.String()
	}
	dh := h.Export()
	if len(dh.Hosts) != 2 || dh.Hosts[0].Marks != "F2U2" || dh.Hosts[1].Marks != "-?F-" {
		t.Fatalf("exported %+v, want a F2U2 and b -?F-", dh.Hosts)
	}
	back, err := statuspage.ImportHistory(10, dh)
	if err != nil {
		t.Fatal(err)
	}
	if rows(back) != rows(h) || back.Len() != 4 {
		t.Fatalf("read back:\n%s\nwant\n%s", rows(back), rows(h))
	}
	small, err := statuspage.ImportHistory(2, dh)
	if err != nil || small.Len() != 2 {
		t.Fatalf("read into 2: %v, len %d", err, small.Len())
	}
	if oldest, _ := small.Span(); !oldest.Equal(h.Export().DecodeTimes()[2]) {
		t.Errorf("read into 2, the oldest kept is %v, want the third decision's", oldest)
	}
	twice := *dh
	twice.Hosts = append(slices.Clone(dh.Hosts), dh.Hosts[0])
	if _, err := statuspage.ImportHistory(10, &twice); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("a host named twice: %v", err)
	}
	short := *dh
	short.Hosts = []status.HostHistory{{Name: "a", Marks: "F3"}}
	if _, err := statuspage.ImportHistory(10, &short); err == nil {
		t.Error("marks for 3 of 4 decisions read")
	}
}

// The page names the fleet-role version of the controller that wrote the
// decision, as text: in a rollout that mixes two versions it says which one
// decided. A decision no elected controller wrote (decide, the demo) names
// none.
func TestPageNamesTheWritersVersion(t *testing.T) {
	st := fleet(t, 4, false)
	if n := versionShown(t, render(t, st, nil)); n != nil {
		t.Fatalf("a decision with no writer shows a version: %q", browser.Text(n))
	}
	const v = `v0.1.0-<b>"rc"</b>`
	st.Writer = &status.Writer{Identity: "controller-a", Lease: "fleet-role/fleet-role-controller", Term: 3, Version: v}
	n := versionShown(t, render(t, st, nil))
	if n == nil {
		t.Fatalf("the page shows no version for a writer of %q", v)
	}
	if got := browser.Text(n); got != v {
		t.Fatalf("the page shows the version %q, want %q as text", got, v)
	}
}

func versionShown(t *testing.T, page []byte) *html.Node {
	t.Helper()
	return browser.ByID(parse(t, page), "version")
}

// A voter unfit only by its links to an implicated voter says so beside its
// verdict, apart from one unfit by a reading of its own; the tolerance
// shown first is the attributed one, every unfit voter counted beside it.
func TestPageSaysWhoseLinkMakesAVoterUnfit(t *testing.T) {
	st := fleet(t, 4, false)
	var cleared, own string
	for i := range st.Hosts {
		h := &st.Hosts[i]
		if h.Role != status.RoleVoter {
			continue
		}
		h.Verdict = status.Unfit
		if cleared == "" {
			cleared, h.UnfitByLinksTo = h.Name, []string{"voter-x"}
		} else if own == "" {
			own = h.Name
		}
	}
	if cleared == "" || own == "" {
		t.Fatal("the fleet has fewer than two voters")
	}
	st.FailureTolerance = status.FailureTolerance{Voters: 5, Quorum: 3, Unfit: 5, Cleared: 4, Attributed: 1, Tolerance: 0, OptimisticTolerance: 2, DesignTolerance: 2}
	doc := parse(t, render(t, st, nil))
	cells := map[string]string{}
	browser.Walk(browser.ByID(doc, "hosts"), func(tr *html.Node) {
		if tr.Type != html.ElementNode || tr.Data != "tr" {
			return
		}
		if th, tds := browser.Children(tr, "th"), browser.Children(tr, "td"); len(th) == 1 && len(tds) >= 2 {
			cells[browser.Text(th[0])] = browser.Text(tds[1])
		}
	})
	if got, want := cells[cleared], "✗ unfit: its link to voter-x"; got != want {
		t.Errorf("%s's verdict cell %q, want %q", cleared, got, want)
	}
	if got, want := cells[own], "✗ unfit"; got != want {
		t.Errorf("%s's verdict cell %q, want %q", own, got, want)
	}
	if got := browser.Text(browser.ByID(doc, "tolerance-value")); got != "1" {
		t.Errorf("the tolerance shown first is %q, want the attributed 1", got)
	}
	if got := browser.Text(browser.ByID(doc, "tolerance-strict")); got != "0" {
		t.Errorf("the tolerance counting every unfit voter is %q, want 0", got)
	}
}

// The timing section: the cluster's heartbeat and election timeout beside
// what the readings call for, and the k3s lines that set it when short.
func TestPageTimingAdvice(t *testing.T) {
	st := fleet(t, 4, false)
	if got := browser.Text(browser.ByID(parse(t, render(t, st, nil)), "timing-verdict")); got != "✓ covered" {
		t.Errorf("a healthy fleet's timing verdict %q, want ✓ covered", got)
	}
	st.Timing = status.Timing{CurrentHeartbeatMs: 500, CurrentElectionMs: 5000, HeartbeatMs: 610, ElectionMs: 6100,
		RTT:     &status.TimingReading{Seconds: 0.601, Needs: 0.601, Signal: status.SignalPeerRTT, From: "voter-1", To: "voter-2"},
		Verdict: status.TimingRaise, EtcdArgs: []string{"heartbeat-interval=610", "election-timeout=6100"}}
	doc := parse(t, render(t, st, nil))
	for id, want := range map[string]string{
		"timing-verdict":   "✗ raise",
		"timing-heartbeat": "610 ms",
		"timing-election":  "6100 ms",
		"timing-args":      "etcd-arg:\n  - heartbeat-interval=610\n  - election-timeout=6100\n",
	} {
		if got := browser.Text(browser.ByID(doc, id)); got != want {
			t.Errorf("#%s %q, want %q", id, got, want)
		}
	}
}

// The history says when its decisions were made: the ruler above the rows
// names the oldest and the newest decision's time, each row has as many
// columns as the ruler, and a decision that came more than the page's gap
// (a period) after the one before it has a gap mark before it in every
// row and in the ruler. At, under and over the gap.
func TestHistoryTimeAxis(t *testing.T) {
	const period = 10 * time.Second
	t0 := time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC)
	var (
		h    = statuspage.NewHistory(40)
		want = map[string]string{"a": "", "b": ""}
	)
	add := func(after time.Duration, gap bool, a, b status.Verdict) {
		t0 = t0.Add(after)
		h.Add(&status.Status{GeneratedAt: t0, Hosts: []status.Host{{Name: "a", Verdict: a}, {Name: "b", Verdict: b}}})
		for host, v := range map[string]status.Verdict{"a": a, "b": b} {
			if gap {
				want[host] += "┆"
			}
			want[host] += map[status.Verdict]string{status.Fit: "F", status.Unfit: "U", status.Unknown: "?"}[v]
		}
	}
	// Enough decisions on each side of the gaps that the ruler's two
	// times, which take its first and last columns, cover none.
	add(0, false, status.Fit, status.Fit)
	for range 10 {
		add(period/2, false, status.Fit, status.Fit)
	}
	add(period/2, false, status.Fit, status.Unfit)
	add(period, false, status.Fit, status.Unfit)                    // at the gap: none
	add(period-time.Millisecond, false, status.Unfit, status.Unfit) // under
	add(period+time.Millisecond, true, status.Unfit, status.Fit)    // over
	add(3*period, true, status.Unknown, status.Fit)                 // a failover's silence
	add(period/2, false, status.Unknown, status.Fit)
	add(-period, false, status.Fit, status.Fit) // a clock behind the one before: no gap
	for range 10 {
		add(period/2, false, status.Fit, status.Fit)
	}

	row := func(host string, over time.Duration) string {
		var b strings.Builder
		for _, c := range h.Cells(host, over) {
			b.WriteString(c.Text)
		}
		return b.String()
	}
	ruler := h.Ruler(period)
	for host, w := range want {
		if got := row(host, period); got != w {
			t.Errorf("%s's row: %q, want %q", host, got, w)
		}
		if utf8.RuneCountInString(row(host, period)) != utf8.RuneCountInString(ruler) {
			t.Errorf("%s's row %q and the ruler %q differ in width", host, row(host, period), ruler)
		}
		if got, w := row(host, 0), strings.ReplaceAll(w, "┆", ""); got != w {
			t.Errorf("%s's row with no gap set: %q, want %q", host, got, w)
		}
	}
	oldest, newest := h.Span()
	if !strings.HasPrefix(ruler, oldest.Format("15:04:05")) || !strings.HasSuffix(ruler, newest.Format("15:04:05")) {
		t.Errorf("the ruler %q does not begin with the oldest decision's time %s and end with the newest's %s", ruler, oldest.Format("15:04:05"), newest.Format("15:04:05"))
	}
	if gaps := strings.Count(ruler, "┆"); gaps != 2 {
		t.Errorf("the ruler %q marks %d gaps, want 2", ruler, gaps)
	}

	st := fleet(t, 2, false)
	var b bytes.Buffer
	if err := statuspage.Render(&b, statuspage.Page{Model: statuspage.ModelOf(st), History: h, Source: "test", Gap: period}); err != nil {
		t.Fatal(err)
	}
	section := browser.Text(browser.ByID(parse(t, b.Bytes()), "history"))
	for _, w := range []string{
		"28 remembered, from " + oldest.Format("15:04:05") + " to " + newest.Format("15:04:05") + " UTC",
		"┆ where more than 10s passed between two decisions",
		ruler,
	} {
		if !strings.Contains(section, w) {
			t.Errorf("the history section lacks %q:\n%s", w, section)
		}
	}
}
